"""Predicates for whole classes of hazard that follow from the state model and the calls' parameters: a call
that breaks a graph capture in progress, memory used or freed after it was freed, a stream, event or module
used after its own destroy or unload, an allocation that ran out of memory while the process held memory
elsewhere, and a launch refused for its configuration. Each finding names the state that explains it."""

from __future__ import annotations

from ctxlab.audit.engine import Hit, Stream, ok_or_pending, place_of, thread_of
from ctxlab.audit.model.causes import Cause, handle_gone, missing, on
from ctxlab.audit.model.memory import pointer_words
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.model.state import CAPTURE_MODES, OUT_OF_MEMORY, caller_of
from ctxlab.audit.rules.rule import NO_CLAIM, Rule
from ctxlab.tracing.fields import launch_shape

CAPTURE_STATUSES = ("CUDA_ERROR_STREAM_CAPTURE", "cudaErrorStreamCapture", "CUDA_ERROR_CAPTURED_EVENT",
                    "cudaErrorCapturedEvent")
CONFIG_STATUSES = ("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "cudaErrorInvalidConfiguration",
                   "cudaErrorInvalidValue", "cudaErrorLaunchOutOfResources")
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_Z = 64
STATIC_SHARED_LIMIT = 48 * 1024  # more dynamic shared memory needs cuFuncSetAttribute first
FREE_CALLS = ("cuMemFree", "cudaFree")


def capture_violation(s: Stream) -> list[Hit]:
    """A call made while a stream was capturing a graph that the capture does not allow (a synchronous copy,
    an allocation, a synchronisation, work on the legacy stream, or, in global mode, such a call from any
    thread): it fails, and the capture is invalidated (its end call fails too, folded here). One finding per
    capture and thread, at the first such call; the thread's later ones are folded into it."""
    m = model(s)
    found: dict[tuple, list[dict]] = {}
    captures = {}
    ends = {id(c.end) for c in m.captures if c.end is not None}
    for e in m.failed_calls():
        state = m.states.get(id(e))
        if state is None or id(e) in s.explained or state.same_as is not None or id(e) in ends:
            continue
        if not str(e.get("status")).startswith(CAPTURE_STATUSES):
            continue  # another failure during a capture is its own (other threads are free in thread-local mode)
        capturing = [c for c in state.captures if c.begin is not e]
        if not capturing:
            capturing = [c for c in m.captures if c.begin.get("start", 0) <= e.get("start", 0)][-1:]
        if not capturing:
            continue
        key = (id(capturing[-1].begin), e.get("tid"))
        captures[key] = capturing[-1]
        found.setdefault(key, []).append(e)
    hits = []
    for key, calls in found.items():
        capture, e = captures[key], calls[0]
        mode = CAPTURE_MODES.get(capture.mode, "unknown") if capture.mode is not None else "unknown"
        other = e.get("tid") != capture.begin.get("tid")
        where = (f"from thread {thread_of(e)}, another thread than the capturing one" if other else f"on thread "
                 f"{thread_of(e)}, the capturing thread")
        rule = ("in global mode no thread may make an unsafe call (synchronous copies, allocations, "
                "synchronisations) while any capture is in progress" if mode == "global" and other else
                "a call that would synchronise or touch the legacy stream cannot be captured")
        end = capture.end
        ended = (f"; the capture's {end['name']} then returned {end.get('status')}" if end is not None
                 and not ok_or_pending(end) else "")
        more = f" ({len(calls) - 1} more call(s) of this thread failed during the capture)" if len(calls) > 1 else ""
        hits.append(Hit(e, f"{e['name']} {where} returned {e.get('status')} while stream {capture.stream:#x} was "
                           f"capturing a graph ({mode} mode, begun with {capture.begin['name']} on thread "
                           f"{thread_of(capture.begin)}{place_of(capture.begin)}): {rule}{more}. The capture is "
                           f"invalidated{ended}. Make such calls before the capture begins or after it ends, or "
                           f"capture in thread-local or relaxed mode when other threads must go on",
                        calls=(e, *((end,) if end is not None and not ok_or_pending(end) else ())),
                        related=(("capture begun at", capture.begin),), explains=tuple(calls), cause=capture.begin,
                        cause_what=f"{on(capture.begin)} began capturing stream {capture.stream:#x} in {mode} mode, "
                                   f"and the capture had not ended"))
    return hits


CAPTURE_VIOLATION_RULE = Rule(
    "capture-violation", "error", "A call that breaks a CUDA graph capture in progress",
    "While a stream captures a graph, calls that would synchronise or use the legacy stream (a synchronous "
    "copy, cudaMalloc, a device or stream synchronisation) are not allowed; in global mode (PyTorch's "
    "default) such a call from any thread is refused. The call fails and the capture is invalidated: its "
    "end call fails too.",
    NO_CLAIM, capture_violation,
    "Follows captures begun and ended while tracing (cuStreamBeginCapture*, cudaStreamBeginCapture); a call "
    "that fails with a capture status when no capture was recorded is named with the last capture begun.")


def freed_memory_used(s: Stream) -> list[Hit]:
    """Memory freed and then freed again, copied, set, or passed to a kernel: the call names the allocation
    and where it was freed (a freed block may already belong to someone else)."""
    m = model(s)
    hits, seen = [], set()
    # Only a call after the first free can use freed memory: the earlier ones need no look at their pointers.
    first_free = min((b.freed.get("start", 0) for b in m.blocks if b.freed is not None), default=None)
    for e in s.calls:
        if id(e) in s.explained or e.get("from") == "callback" and s.enclosing_runtime(e) is not None:
            continue
        state = m.states.get(id(e))
        if state is not None and state.same_as is not None:
            continue
        at = e.get("start", 0)
        found = []
        if state is not None:
            found = [(role, address, block) for role, address, block in state.blocks if block is not None
                     and block.freed is not None and block.freed is not e and block.freed.get("start", 0) < at]
        elif first_free is None or at <= first_free:
            pass
        elif any(key in (e.get("args") or {}) for key in ("ptr", "src")):
            for role in ("ptr", "src"):  # a call that ran on freed memory: the silent case
                address = (e.get("args") or {}).get(role)
                if not address or e.get("name", "").startswith(("cuMemAlloc", "cudaMalloc")):
                    continue
                block = m.block(address, at)
                if block is not None and block.freed is not None and block.freed is not e \
                        and block.freed.get("start", 0) < at and not _mapped_since(s, block.freed, at):
                    found.append((role, address, block))
        elif isinstance(e.get("arguments"), bytes) and e.get("name", "").startswith("cuLaunch"):
            for index, _offset, value in pointer_words(e["arguments"]):
                block = m.block(value, at)
                if block is not None and block.freed is not None and block.freed.get("start", 0) < at \
                        and not _mapped_since(s, block.freed, at):
                    found.append((f"parameter {index}", value, block))
        for role, address, block in found[:1]:
            key = (id(block), e.get("name"))
            if key in seen:
                continue
            seen.add(key)
            again = e.get("name", "").startswith(FREE_CALLS) and address == block.base
            what = "freed again" if again else f"used ({role} {address:#x})"
            outcome = f"returned {e.get('status')}" if not ok_or_pending(e) else "ran"
            assert block.freed is not None
            hits.append(Hit(e, f"{e['name']} on thread {thread_of(e)} {outcome}: the {block.size}-byte allocation at "
                               f"{block.base:#x} ({block.made['name']} on thread {thread_of(block.made)}"
                               f"{place_of(block.made)}) was {what} after {block.freed['name']} on thread "
                               f"{thread_of(block.freed)}{place_of(block.freed)} had freed it. Freed memory may "
                               f"already hold another allocation: free each block once, after its last use",
                            calls=(block.freed, e), related=(("freed at", block.freed), ("allocated at", block.made)),
                            cause=block.freed, cause_what=f"{on(block.freed)} freed the {block.size}-byte allocation "
                                                          f"at {block.base:#x} that {role} {address:#x} points into"))
    return hits


FREED_MEMORY_USED_RULE = Rule(
    "freed-memory-used", "error", "Memory used or freed again after it was freed",
    "A pointer freed with cuMemFree or cudaFree may already back another allocation: freeing it again "
    "returns CUDA_ERROR_INVALID_VALUE (or frees someone else's memory), and copying, setting or passing it to "
    "a kernel reads or writes memory that is no longer yours (an illegal address, or silent corruption).",
    NO_CLAIM, freed_memory_used,
    "Follows allocations made while tracing through cuMemAlloc* and cudaMalloc (not a library pool's reuse of "
    "its own blocks, which never reaches the driver); kernel arguments are read for every driver launch "
    "(cuLaunchKernel*, cuLaunchCooperativeKernel), each distinct launch once; a runtime launch the runtime "
    "makes with no driver launch beneath it (PyTorch's) shows none.")


VMM = ("cuMemMap", "cuMemCreate", "cuMemAddressReserve")


def _mapped_since(s: Stream, freed: dict, at: int) -> bool:
    """Memory mapped through the virtual memory API between a free and a call (a PyTorch expandable segment,
    say): the freed range may hold it now, out of the allocation map's sight, so a call that ran there is not
    judged."""
    return any(e.get("name", "").startswith(VMM) and freed.get("start", 0) < e.get("start", 0) < at
               for e in s.calls)


def handle_destroyed(s: Stream) -> list[Hit]:
    """A stream, event or module used after the program destroyed or unloaded it."""
    m = model(s)
    hits, seen = [], set()
    for e in m.failed_calls():
        state = m.states.get(id(e))
        if state is None or id(e) in s.explained:
            continue
        for role, value, known in state.handles:
            if known is None or known.gone is None or known.gone is e:
                continue
            if known.gone.get("start", 0) >= e.get("start", 0) or (id(known), e.get("tid")) in seen:
                continue
            seen.add((id(known), e.get("tid")))
            gone = known.gone
            hits.append(Hit(e, f"{e['name']} on thread {thread_of(e)} returned {e.get('status')}: its {role} "
                               f"{value:#x} ({known.kind} made by {known.made['name']} on thread "
                               f"{thread_of(known.made)}{place_of(known.made)}) had been released by {gone['name']} on "
                               f"thread {thread_of(gone)}{place_of(gone)}. A destroyed handle's value may be reused by "
                               f"the next one made: keep each handle until its last use, or drop every reference to it "
                               f"when it is destroyed",
                            calls=(gone, e), related=(("destroyed at", gone), ("made at", known.made)),
                            **handle_gone(known, role, value).hit_fields()))
            break
    return hits


HANDLE_DESTROYED_RULE = Rule(
    "handle-destroyed", "error", "A stream, event or module used after it was destroyed",
    "cuStreamDestroy, cuEventDestroy and cuModuleUnload end a handle's life; a later call passing it gets "
    "CUDA_ERROR_INVALID_HANDLE or CUDA_ERROR_INVALID_CONTEXT, or, where its value was reused, works on "
    "another object.",
    NO_CLAIM, handle_destroyed,
    "Knows the handles made and destroyed while tracing by the driver calls that take them.")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n < 1 << 30 else f"{n / (1 << 30):.1f} GiB"


def out_of_memory(s: Stream) -> list[Hit]:
    """An allocation that failed for lack of memory, with what the process held on that device then: bytes
    allocated and not freed per context and per library (a library's pool keeps what it freed), and the
    contexts alive there."""
    m = model(s)
    hits, seen = [], set()
    for e in m.failed_calls():
        state = m.states.get(id(e))
        if state is None or id(e) in s.explained or not str(e.get("status")).startswith(OUT_OF_MEMORY):
            continue
        if state.same_as is not None or state.handled_by is not None:
            continue  # reported with the runtime call around it; or the runtime handled it
        key = (e.get("tid"), (e.get("stack") or [[None, None]])[0][1])
        if key in seen:  # a library that retries (PyTorch frees its cache and asks again): one finding
            continue
        seen.add(key)
        at = e.get("start", 0)
        retries = [c for c in s.calls if c is not e and (c.get("tid"), (c.get("stack") or [[None, None]])[0][1])
                   == key and str(c.get("status")).startswith(OUT_OF_MEMORY)]
        held: dict[str, int] = {}
        for block in m.blocks:
            device = m.facts.device.get(block.context)
            if state.device is not None and device is not None and device != state.device:
                continue  # memory on another GPU does not fill this one
            if block.made.get("start", 0) <= at and (block.freed is None or block.freed.get("start", 0) > at):
                who = _allocator(s, block.made)
                held[who] = held.get(who, 0) + block.size
        asked = (e.get("args") or {}).get("size")
        holders = ", ".join(f"{who} {_mib(n)}" for who, n in sorted(held.items(), key=lambda kv: -kv[1])) or "nothing"
        contexts = [c for c in m.facts.made if c not in m.facts.destroyed and m.facts.device.get(c) == state.device]
        want = f" of {_mib(asked)}" if asked else ""
        live = [b for b in m.blocks if b.made.get("start", 0) <= at and (b.freed is None or b.freed.get("start", 0)
                > at) and (state.device is None or m.facts.device.get(b.context) in (None, state.device))]
        big = max(live, key=lambda b: b.size, default=None)
        because = (Cause(big.made, f"{on(big.made)} ({_allocator(s, big.made)}) allocated {_mib(big.size)} that was "
                                   f"not freed, the largest allocation held then") if big is not None else
                   missing("the process held no memory allocated while tracing (other processes, or the "
                           "contexts' own reservation)"))
        hits.append(Hit(e, f"{e['name']}{want} on thread {thread_of(e)} returned {e.get('status')}: the process held "
                           f"{holders} in allocations not freed (a library's memory pool keeps what the program freed "
                           f"for reuse), and {len(contexts)} context(s) on this GPU, each holding memory of its own. "
                           f"Free the other library's cache first (cupy.get_default_memory_pool().free_all_blocks(), "
                           f"torch.cuda.empty_cache()) or let one library own the GPU's memory",
                        calls=(e,), explains=tuple(retries), **because.hit_fields()))
    return hits


OUT_OF_MEMORY_RULE = Rule(
    "out-of-memory", "error", "An allocation ran out of memory while the process held memory elsewhere",
    "An allocation failed for lack of GPU memory. The finding says what the process itself held then: the "
    "bytes each library allocated and did not free (CuPy's and PyTorch's pools keep freed memory for reuse) "
    "and the contexts alive on that GPU, each with memory of its own.",
    NO_CLAIM, out_of_memory,
    "Counts allocations made through cuMemAlloc* and cudaMalloc while tracing; memory of other processes and "
    "a context's own reservation are not measured.")


def _allocator(s: Stream, made: dict) -> str:
    outer = s.enclosing_runtime(made)
    library, _ = caller_of(outer or made, s)
    if library == "the CUDA runtime" and outer is not None:
        library = caller_of(outer, s)[0]
    return library or made.get("library") or "the program"


def launch_config(s: Stream) -> list[Hit]:
    """A launch refused for its configuration: more threads per block than the device allows, a block's z over
    64, more dynamic shared memory than a kernel gets without opting in."""
    m = model(s)
    hits, seen = [], set()
    for e in m.failed_calls():
        state = m.states.get(id(e))
        if state is None or id(e) in s.explained or not e.get("name", "").startswith(("cuLaunch", "cudaLaunch")):
            continue
        if str(e.get("status")) not in CONFIG_STATUSES:
            continue
        shape = launch_shape(e.get("args") or {})
        if shape is None:
            continue
        grid, block, shared = shape
        threads = block[0] * block[1] * max(block[2], 1)
        problems = []
        if threads > MAX_THREADS_PER_BLOCK:
            problems.append(f"a block of {block[0]} x {block[1]} x {block[2]} = {threads} threads, over the "
                            f"{MAX_THREADS_PER_BLOCK} a block may have")
        if block[2] > MAX_BLOCK_Z:
            problems.append(f"a block depth of {block[2]}, over {MAX_BLOCK_Z}")
        if shared > STATIC_SHARED_LIMIT:
            problems.append(f"{shared} bytes of dynamic shared memory, over the {STATIC_SHARED_LIMIT} a kernel gets "
                            f"without cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        if 0 in block[:2] or 0 in grid[:2]:
            problems.append(f"an empty grid or block (grid {grid[0]} x {grid[1]}, block {block[0]} x {block[1]})")
        if not problems and str(e.get("status")).endswith(("OUT_OF_RESOURCES", "OutOfResources")):
            problems.append(f"a block of {threads} threads whose registers or shared memory exceed what one "
                            f"multiprocessor has (cuFuncGetAttribute gives the kernel's needs)")
        if not problems:
            continue
        key = (e.get("tid"), (e.get("stack") or [[None, None]])[0][1])
        if key in seen:
            continue
        seen.add(key)
        hits.append(Hit(e, f"{e['name']} on thread {thread_of(e)} returned {e.get('status')}: the launch asked for "
                           f"{'; '.join(problems)}. No kernel ran; fix the launch's configuration", calls=(e,),
                        cause=e, cause_what=f"{on(e)} asked for {problems[0]}"))
    return hits


LAUNCH_CONFIG_RULE = Rule(
    "launch-config", "error", "A kernel launch refused for its configuration",
    "A launch whose block has more than 1024 threads, a depth over 64, or more dynamic shared memory than "
    "the kernel may use without cuFuncSetAttribute is refused (CUDA_ERROR_INVALID_VALUE, invalid "
    "configuration argument); a block whose registers do not fit fails with too many resources requested.",
    NO_CLAIM, launch_config,
    "Reads grid, block and shared memory of cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and "
    "cudaLaunchKernel (a grid's depth is not kept).")
