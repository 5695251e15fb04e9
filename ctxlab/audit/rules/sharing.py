"""Predicates of the rules about CUDA state shared where it must not be: a process forked after CUDA was
initialised, several copies of the CUDA runtime in one process, a kernel argument pointing into another
context's memory, a green context current on two threads at once. Messages are built from the values observed
(calls, statuses, threads)."""

from __future__ import annotations

from ctxlab.audit.engine import NOT_CALLS, Hit, Stream, end_of, ok_or_pending, thread_of
from ctxlab.audit.events import ALLOCATION_PREFIXES
from ctxlab.audit.model.causes import Cause, missing, on
from ctxlab.audit.model.hooks import FOREIGN_POINTER
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules.context import by_runtime, first_teardown
from ctxlab.audit.rules.rule import Rule


def fork_after_init(s: Stream) -> list[Hit]:
    """A child forked after CUDA was initialised in the parent calls CUDA (seen by the audit's fork hook)."""
    hits = []
    for f in s.forks:
        first = f.get("first_call")
        if not f.get("parent_initialised") or not first:
            continue
        child = f"child {f.get('pid')}"
        event = {"domain": "fork", "name": str(first.get("what", "?")), "thread": child, "tid": f.get("pid"),
                 "start": 0, "status": f.get("cuda_status")}
        fork_event = {"domain": "fork", "name": "fork", "thread": str(f.get("thread", "?")),
                      "stack": f.get("fork_stack") or []}
        hits.append(Hit(event, f"process {f.get('pid')}, forked by thread {f.get('thread', '?')} after CUDA was "
                               f"initialised in its parent, called {first.get('what', '?')}; CUDA in that child: "
                               f"{f.get('cuda_status') or 'not probed'}. CUDA is not fork-safe: start children with "
                               f"'spawn' or 'forkserver', or fork before the first CUDA call",
                        calls=(event,), related=(("forked at", fork_event),), stack=tuple(first.get("stack") or ()),
                        location_from="fork hook", cause=fork_event,
                        cause_what=f"os.fork on thread {fork_event['thread']} made this child after CUDA was "
                                   f"initialised in the parent: the child inherits CUDA's state but not its driver "
                                   f"threads and contexts"))
    return hits


FORK_AFTER_INIT_RULE = Rule(
    "fork-after-init", "error", "CUDA used in a child forked after initialisation",
    "CUDA is not fork-safe: in a child made by fork after the parent initialised CUDA, every driver call "
    "returns CUDA_ERROR_NOT_INITIALIZED (CuPy: cudaErrorInitializationError; PyTorch refuses). Start "
    "children with 'spawn' or 'forkserver', or fork before the first CUDA call.",
    "interop.start-methods", fork_after_init,
    "Seen through os.register_at_fork in the audited process: in a child forked after CUPTI saw CUDA "
    "initialised, the first call into a CUDA library module (cupy, cuda.*, torch.cuda, numba.cuda, jax) is "
    "noted with its stack and CUDA's state there is probed with cuInit; a child made by a fork the Python "
    "interpreter did not perform (a C library's own fork) or exec'ing another program is not seen.")


def several_runtime_copies(s: Stream) -> list[Hit]:
    """More than one copy of the CUDA runtime initialised on the same primary context: each retains it.

    A retain the tracer kept the native callers of (``callers``: shared objects, innermost first) names its copy:
    the first object past the driver. Two retains from the same object are one copy retaining again, not two."""
    teardown_at = first_teardown(s)
    by_context: dict = {}
    for e in s.named(("cuDevicePrimaryCtxRetain",)):
        if not e.get("name", "").startswith("cuDevicePrimaryCtxRetain") or not ok_or_pending(e):
            continue
        if teardown_at is not None and e.get("start", 0) > teardown_at:
            continue  # a runtime retaining again after a reset is the same copy
        if not by_runtime(s, e):
            continue  # the program's (or a library's) own driver retain
        outer = s.enclosing_runtime(e) or {"name": "a runtime call CUPTI did not record", "context": 0}
        copies = by_context.setdefault(e.get("context") or outer.get("context") or 0, {})
        # the copy is its shared object; unnamed (no callers kept), every retain counts as a copy of its own
        copy = (e.get("callers") or [f"unnamed {len(copies)}"])[0]
        copies.setdefault(copy, []).append((e, outer))
    hits = []
    for handle, copies in by_context.items():
        if len(copies) < 2:
            continue
        firsts = [retains[0] for retains in copies.values()]
        e, _ = firsts[1]
        named = all(not copy.startswith("unnamed") for copy in copies)
        which = ("; ".join(f"{runtime_copy(first)} at {outer.get('name', '?')}" for first, outer in firsts) if named
                 else ", ".join(outer.get("name", "?") for _, outer in firsts))
        where = f" {handle:#x}" if handle else ""
        text = (f"{len(copies)} copies of the CUDA runtime each retained the primary context{where}: {which}"
                if named else
                f"{len(copies)} runtime calls ({which}) each retained the primary context{where}: each was the "
                "first call of a copy of the CUDA runtime (its shared object was not recorded)")
        hits.append(Hit(e, text + ". Each copy holds its own reference and state, and a cudaDeviceReset through "
                                  "one destroys the context under the others",
                        calls=tuple(x for pair in firsts for x in pair if "start" in x),
                        related=tuple(("retained first at", r) for r, _ in firsts[:1]),
                        cause=firsts[0][1] if "start" in firsts[0][1] else firsts[0][0],
                        cause_what=f"{firsts[0][1].get('name', '?')} on thread {thread_of(firsts[0][0])} was the first "
                                   f"call of another copy of the runtime, which retained the primary context first"))
    return hits


SEVERAL_RUNTIME_COPIES_RULE = Rule(
    "several-runtime-copies", "info", "Several copies of the CUDA runtime in one process",
    "Each copy of the CUDA runtime in the process (CuPy's, cuda.bindings', a library's statically linked "
    "one) retains the primary context when it initialises and has its own state. A cudaDeviceReset through "
    "one copy destroys the context under the others.",
    "refcount.reference-per-runtime-copy", several_runtime_copies,
    "Counts the copies of the runtime that retained the primary context beneath one of their calls (the "
    "first call of each copy on a device), each named by its shared object (the first past the driver on "
    "the retain's native stack, with the object that called it); where that stack was not kept, each such "
    "runtime call counts as a copy and the finding says the copies are unnamed.")


def runtime_copy(retain: dict) -> str:
    """The runtime copy that made a primary-context retain, as its shared object and the object that called it
    (``libcudart.so.13 called from torch/lib/libtorch_cuda.so``)."""
    found = retain.get("callers") or ["?"]
    return found[0] if len(found) == 1 else f"{found[0]} called from {found[1]}"


def _allocation_call(s: Stream, correlation: object, owner: int) -> dict | None:
    """The allocation call (with the user's stack) an allocation map entry came from, by correlation id."""
    found = None
    for e in s.calls:
        if e.get("correlation") == correlation and e.get("name", "").startswith(ALLOCATION_PREFIXES + ("cuMemAlloc",)):
            if e.get("stack") and e.get("context") in (owner, 0, None):
                return e
            found = found or e
    return found


def pointer_from_another_context(s: Stream) -> list[Hit]:
    """A kernel argument holding an address inside memory another context allocated (read by the audit's
    launch hook); not between a green context and the primary context, which share memory by design."""
    f = model(s).facts
    greens = set(f.green)
    shared = greens | f.primary if greens else set()
    destroyed = {e.get("context"): e for e in s.resources if e.get("name") == "CONTEXT_DESTROY_STARTING"}
    hits, seen = [], set()
    # the one pass's notes; in the pytest guard's stream also the hooks' (allocations of earlier tests): one each
    notes = [e for e in s.observed if e.get("name") == FOREIGN_POINTER] + model(s).foreign
    for e in sorted(notes, key=lambda note: note.get("start", 0)):
        ctx, owner = e.get("context") or 0, e.get("owner") or 0
        if ctx in shared and owner in shared and (ctx in greens or owner in greens):
            continue  # green and primary: the green context is treated as the primary one for memory
        key = (e.get("tid"), ctx, owner, e.get("function"))
        if key in seen:
            continue
        seen.add(key)
        alloc = _allocation_call(s, e.get("allocation_correlation"), owner)
        where = (f" ({alloc['name']})" if alloc else "")
        gone = destroyed.get(owner)
        later = (f"; context {owner:#x} was destroyed later in the run" if gone is not None
                 and gone.get("start", 0) > e.get("start", 0) else "")
        what = "the launch's extra buffer" if e.get("parameter") == -1 else f"parameter {e.get('parameter')}"
        hits.append(Hit(e, f"{e.get('launch', 'a launch')} in context {ctx:#x} on thread {thread_of(e)}: {what} "
                           f"(byte {e.get('offset')}) of function {e.get('function', 0):#x} holds "
                           f"{e.get('pointer', 0):#x}, "
                           f"inside a {e.get('size')}-byte allocation made in context {owner:#x}{where}{later}. "
                           f"A kernel can read another context's memory on this GPU, but the memory belongs to "
                           f"context {owner:#x}: it is freed with it (cuCtxDestroy, a reset, that context's memory "
                           f"pool). Allocate it under the context that launches, or use one context per device",
                        calls=tuple(x for x in (alloc, e) if x is not None),
                        related=(("allocated at", alloc),) if alloc else (),
                        **(Cause(alloc, f"{on(alloc)} allocated the memory in context {owner:#x}") if alloc else
                           missing(f"the allocation in context {owner:#x} was not matched to a recorded call")
                           ).hit_fields()))
    return hits


POINTER_FROM_ANOTHER_CONTEXT_RULE = Rule(
    "pointer-from-another-context", "warning", "A kernel argument pointing into another context's memory",
    "A kernel launched in one context was given an address inside memory allocated in another context of "
    "the same process. On the H200 such a kernel reads it correctly, but the memory's lifetime belongs to "
    "the context that allocated it: it is freed when that context is destroyed or reset, and a memory pool "
    "of that context (CuPy's per-device pool) may hand the block to someone else. Allocate under the "
    "context that launches, or keep one context per device.",
    "migrate.own-address-space", pointer_from_another_context,
    "Reads arguments of cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel (also the _ptsz "
    "forms) at their entry: every 8-byte-aligned word of each argument of 8 bytes or more (sizes from "
    "cuFuncGetParamInfo, CUDA 12.4+), so a pointer member of a struct argument and a pointer offset into an "
    "allocation are found; arguments packed in the extra buffer (CU_LAUNCH_PARAM_BUFFER_POINTER) too. It "
    "cannot see: pointers stored in device memory (an array of pointers, a struct passed by pointer); "
    "launches made through the runtime (cudaLaunchKernel) unless the runtime calls cuLaunchKernel beneath "
    "(the audit's stats count the launch callbacks against cuLaunchKernel's records); graph launches; "
    "memory allocated before tracing began, through cuMemCreate/cuMemMap (VMM) or cuMemHostAlloc, or by a "
    "library's own allocator that does not call cuMemAlloc*; a word that happens to equal an address is "
    "read as a pointer. A launch with the same function, context and argument bytes is inspected once. "
    "Green and primary contexts share memory by design and are not reported.")


def _current_spans(items: list[dict], handles: set) -> list[tuple[int, int, dict]]:
    """(start, end, first call) of each run of consecutive calls on one thread with one of these contexts
    current: from the first such call's start to the last one's end."""
    spans: list[tuple[int, int, dict]] = []
    run: list | None = None
    for e in items:
        if e.get("domain") in NOT_CALLS:
            continue
        handle = e.get("context") or 0
        if run is not None and handle == run[2].get("context"):
            run[1] = max(run[1], end_of(e))
            continue
        if run is not None:
            spans.append((run[0], run[1], run[2]))
            run = None
        if handle in handles:
            run = [e.get("start", 0), end_of(e), e]
    if run is not None:
        spans.append((run[0], run[1], run[2]))
    return spans


def green_context_on_two_threads(s: Stream) -> list[Hit]:
    """The same green context current on two threads at overlapping times (the driver does not stop it)."""
    greens = dict(model(s).facts.green)  # a copy: the facts are the model's, shared with every rule
    if not greens:
        return []
    for handle in model(s).facts.primary & set(greens):
        greens.pop(handle)  # a green context whose handle is the primary context's cannot be told apart
    if not greens:
        return []
    by_handle: dict[int, list[tuple[int, int, dict]]] = {}
    for items in s.by_tid.values():
        for span in _current_spans(items, set(greens)):
            by_handle.setdefault(span[2]["context"], []).append(span)
    hits, seen = [], set()
    for handle, spans in by_handle.items():
        spans.sort(key=lambda sp: sp[0])
        for i, (_, a_end, a) in enumerate(spans):
            for b_start, _, b in spans[i + 1:]:  # sorted by start: b began while a's span was open
                if b_start >= a_end:
                    break
                pair = (handle, a.get("tid"), b.get("tid"))
                if a.get("tid") == b.get("tid") or pair in seen:
                    continue
                seen.add(pair)
                made = greens[handle]
                green = made.get("green") or (made.get("args") or {}).get("green", 0)  # a hook's note, or the call
                what = ("made by cuGreenCtxCreate" if made.get("green_of") else
                        f"cuCtxFromGreenCtx's handle {green:#x}")
                hits.append(Hit(b, f"green context {handle:#x} ({what}) became current "
                                   f"on thread {thread_of(b)} with {b['name']} while current on thread {thread_of(a)} "
                                   f"(since its {a['name']}, until at least its call ending "
                                   f"{(a_end - b_start) / 1e3:.1f} us later). The Driver API allows a green context "
                                   f"current on one thread at a time and does not synchronise calls into it; the "
                                   f"driver does not refuse the second thread. Hand it over (pop, then push on the "
                                   f"other thread) or give each thread its own green context",
                                calls=(a, b), related=(("current on the other thread from", a),
                                                       ("green context made at", made)),
                                **_green_cause(s, a, handle).hit_fields()))
    return hits


GREEN_CONTEXT_ON_TWO_THREADS_RULE = Rule(
    "green-context-on-two-threads", "error", "A green context current on two threads at once",
    "The Driver API says a green context may be current to only one thread at a time and that calls into "
    "it from several threads are not synchronised. The driver does not stop a second thread from pushing "
    "it: both threads' calls run. Hand the green context over (pop it, then push it on the other thread), "
    "or give each thread its own green context.",
    "migrate.green-one-thread-at-a-time", green_context_on_two_threads,
    "Knows a green context by the CUcontext cuCtxFromGreenCtx returned while tracing and by the contexts "
    "created inside cuGreenCtxCreate (CUPTI names the current green context by one of those, not by "
    "cuCtxFromGreenCtx's handle, on driver 580); green contexts made before tracing began are not known. "
    "A thread holds it "
    "from the first call that ran with it current to the last one before a call with another context: "
    "a thread that made it current and then makes no call is not seen holding it, and thread exits are not "
    "seen. A green context whose handle equals the primary context's is not judged.")


def _green_cause(s: Stream, a: dict, handle: int) -> Cause:
    """What made a green context current on the first thread (and nothing there popped it)."""
    change = model(s).current_change(a.get("tid"), a.get("start", 0) + 1)
    if change is None or change.context != handle:
        return Cause(a, f"{on(a)} ran with green context {handle:#x} current (what made it current there is not "
                        f"in the record)")
    return Cause(change.event, f"{on(change.event)} made green context {handle:#x} current there, and that thread "
                               f"had not popped it when the other made it current")
