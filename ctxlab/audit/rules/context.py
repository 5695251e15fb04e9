"""Predicates of the rules about which context a thread has: none at all, one destroyed under it, the
primary context released or reset under a runtime, a kernel of one context launched in another, a fork
after initialisation, several runtime copies, a pointer into another context's memory, a green context on
two threads. Messages are built from the values observed (calls, statuses, threads)."""

from __future__ import annotations

from ctxlab.audit.engine import NOT_CALLS, Hit, Stream, call_text, end_of, failed, ok_or_pending, thread_of
from ctxlab.audit.events import ALLOCATION_PREFIXES
from ctxlab.audit.model import causes
from ctxlab.audit.model.causes import Cause, missing, on
from ctxlab.audit.model.facts import green_contexts, primary_handles
from ctxlab.audit.model.hooks import FOREIGN_POINTER
from ctxlab.audit.model.one_pass import model

INVALID_CONTEXT = "CUDA_ERROR_INVALID_CONTEXT"
DESTROYED = ("CUDA_ERROR_CONTEXT_IS_DESTROYED", "cudaErrorContextIsDestroyed")
INVALID_HANDLE = ("CUDA_ERROR_INVALID_HANDLE", "cudaErrorInvalidResourceHandle")
# Queries a library makes to find out whether a thread has a context: their INVALID_CONTEXT is an answer.
CONTEXT_QUERIES = ("cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxGetId", "cuCtxGetFlags", "cuCtxGetApiVersion",
          "cuDevicePrimaryCtx")
LAUNCH_OR_LOOKUP = ("cuLaunch", "cudaLaunch", "cuModuleGetFunction", "cuKernelGetFunction", "cuFuncGetAttribute",
                    "cuFuncSetAttribute", "cuFuncSetCacheConfig", "cuOccupancy", "cudaFuncGetAttributes",
                    "cudaFuncSetAttribute")
RESETS = ("cudaDeviceReset", "cuDevicePrimaryCtxReset")
MODULE_LOADS = ("cuModuleLoad",)


def _by_runtime(s: Stream, event: dict) -> bool:
    """Whether a runtime made this driver call beneath one of its own calls: a runtime call on the same thread
    spans it, or the C callback marked it as made while a runtime call was open on its thread (``from``)."""
    return event.get("from") == "callback" or s.enclosing_runtime(event) is not None


# ---------------------------------------------------------------- predicates

def no_context(s: Stream) -> list[Hit]:
    """A driver call that returned CUDA_ERROR_INVALID_CONTEXT on a thread that never had a context."""
    hits, seen = [], set()
    for e in s.unsuccessful:
        if e.get("domain") != "driver" or e.get("status") != INVALID_CONTEXT or e.get("context"):
            continue
        if e.get("name", "").startswith(CONTEXT_QUERIES) or _by_runtime(s, e):
            continue  # a probe, or the runtime asking beneath its own call (it binds a context next)
        if e.get("tid") in seen or s.had_context_before(e.get("tid"), e.get("start", 0)):
            continue
        seen.add(e.get("tid"))
        hits.append(Hit(e, f"{e['name']} returned {INVALID_CONTEXT} on thread {thread_of(e)}, which never had a "
                           f"context current: a driver call needs one (cuCtxSetCurrent or cuCtxPushCurrent first, "
                           f"or a runtime call such as cudaSetDevice, which binds the primary context)",
                        **_elsewhere(s, e).hit_fields()))
    return hits


def _elsewhere(s: Stream, e: dict) -> Cause:
    """A thread with no context: the last call on another thread that made a context current there (the
    program made it current on one thread and used it on another), or none."""
    m = model(s)
    found = None
    for tid, changes in m.changes.items():
        if tid == e.get("tid"):
            continue
        for change in changes:
            if change.at < e.get("start", 0) and change.context and (found is None or change.at > found.at):
                found = change
    if found is None:
        return missing(f"no call on any thread made a context current before it, and thread {thread_of(e)} "
                       f"made none")
    return Cause(found.event, f"{on(found.event)} made context {found.context:#x} current on that thread only: "
                              f"a context is current per thread, and thread {thread_of(e)} never made one current")


def destroyed_while_current(s: Stream) -> list[Hit]:
    """A context destroyed by one thread while current on another; that thread's calls then fail."""
    destroys = [d for d in s.resources if d.get("name") == "CONTEXT_DESTROY_STARTING" and d.get("context")]
    hits, seen = [], set()
    for e in s.unsuccessful:
        if e.get("status") not in DESTROYED:
            continue
        for d in reversed([d for d in destroys if d.get("start", 0) < e.get("start", 0)]):
            if d.get("tid") == e.get("tid"):
                continue
            handle = d["context"]
            if e.get("context") != handle and s.last_context(e.get("tid"), d.get("start", 0)) != handle:
                continue
            if (e.get("tid"), handle) in seen:
                break
            seen.add((e.get("tid"), handle))
            destroy_call = s.enclosing(d, ("cuCtxDestroy",)) or d
            hits.append(Hit(e, f"{e['name']} returned {e['status']} on thread {thread_of(e)}: its current context "
                               f"{handle:#x} was destroyed by thread {thread_of(d)} while still current here (the "
                               f"context stays current on this thread and every call into it fails)",
                            calls=(destroy_call, d, e), related=(("destroyed at", destroy_call), ("destroyed at", d)),
                            cause=destroy_call, cause_what=f"{on(destroy_call)} destroyed context {handle:#x} while it "
                                                           f"was current on thread {thread_of(e)}"))
            break
    return hits


def primary_released_under_runtime(s: Stream) -> list[Hit]:
    """cuDevicePrimaryCtxRelease took the count to zero (the context was destroyed inside it) while the runtime
    still used it: calls after it failed."""
    hits, seen = [], set()
    for r in s.named(("cuDevicePrimaryCtxRelease",)):
        if not r.get("name", "").startswith("cuDevicePrimaryCtxRelease") or not ok_or_pending(r):
            continue
        if _by_runtime(s, r):
            continue  # the runtime's own release (cudaDeviceReset and the like): judged by the reset rule
        destroyed = [d for d in s.resources if d.get("name") == "CONTEXT_DESTROY_STARTING" and d.get("context")
                     and d.get("tid") == r.get("tid") and r.get("start", 0) <= d.get("start", 0) <= end_of(r)]
        if not destroyed:
            continue
        handle = destroyed[0]["context"]
        if handle in seen:
            continue
        used = [c for c in s.calls if c.get("domain") == "runtime" and c.get("context") == handle
                and c.get("start", 0) < r.get("start", 0)]
        later = [c for c in s.calls if c.get("start", 0) > end_of(r) and failed(c)
                 and not c.get("name", "").startswith("cuDevicePrimaryCtx")
                 and (c.get("domain") == "runtime" or c.get("context") == handle)]
        if not used or not later:
            continue
        seen.add(handle)
        retain = next((c for c in s.calls if c.get("name", "").startswith("cuDevicePrimaryCtxRetain") and
                       c.get("start", 0) < r.get("start", 0) and ok_or_pending(c) and _by_runtime(s, c)), None)
        outer = (s.enclosing_runtime(retain) or retain) if retain is not None else None
        because = (Cause(outer, f"{on(outer)} took the runtime's reference to the primary context {handle:#x}: the "
                                f"release dropped that reference, not one the program had retained")
                   if outer is not None else missing("the runtime's reference was taken before tracing began"))
        hits.append(Hit(r, f"cuDevicePrimaryCtxRelease on thread {thread_of(r)} took the primary context "
                           f"{handle:#x} to zero references (CUPTI: CONTEXT_DESTROY_STARTING inside the release) "
                           f"while the runtime used it ({len(used)} runtime call(s) before); {len(later)} call(s) "
                           f"after it failed, first {call_text(later[0])}. Release only the references you retained: "
                           f"each runtime copy holds its own",
                        calls=(r, destroyed[0], *later[:3]),
                        explains=tuple(c for c in s.calls if c.get("start", 0) > end_of(r) and failed(c)
                                       and c.get("context") in (handle, 0)), **because.hit_fields()))
    return hits


def reset_with_live_allocations(s: Stream) -> list[Hit]:
    """cudaDeviceReset or cuDevicePrimaryCtxReset after allocations were made, and calls after it failed."""
    hits = []
    for r in s.named(RESETS):
        if not r.get("name", "").startswith(RESETS) or not ok_or_pending(r):
            continue
        outer = s.enclosing_runtime(r)
        if outer is not None and outer.get("name", "").startswith("cudaDeviceReset"):
            continue  # the driver reset beneath cudaDeviceReset: one finding, for the runtime call
        allocations = [a for a in s.calls if a.get("start", 0) < r.get("start", 0) and ok_or_pending(a)
                       and a.get("name", "").startswith(ALLOCATION_PREFIXES)]
        later = [c for c in s.calls if c.get("start", 0) > end_of(r) and failed(c)]
        if not allocations or not later:
            continue
        used = _used_block(s, later, r)
        made = used.made if used is not None else allocations[-1]
        what = (f"{on(made)} made the {used.size}-byte allocation at {used.base:#x} that {later[0].get('name')} "
                f"after the reset used" if used is not None else
                f"{on(made)} made the last allocation before the reset, which destroyed it")
        hits.append(Hit(r, f"{r['name']} on thread {thread_of(r)} destroyed every allocation of the device's primary "
                           f"context ({len(allocations)} made before it, the last {call_text(allocations[-1])}); "
                           f"{len(later)} call(s) after it failed, first {call_text(later[0])}. Memory and kernels "
                           f"from before a reset cannot be used after it",
                        calls=(allocations[-1], r, *later[:3]), explains=tuple(later), cause=made, cause_what=what))
    return hits


def _used_block(s: Stream, later: list[dict], reset: dict):
    """The allocation made before a reset that a failing call after it points into, if any."""
    m = model(s)
    for c in later:
        for role in ("ptr", "src"):
            address = (c.get("args") or {}).get(role)
            block = m.block(address, reset.get("start", 0)) if address else None
            if block is not None:
                return block
    return None


def _first_end(s: Stream) -> int | None:
    """When the first context destroy or device reset began (None: none did)."""
    ends = [e.get("start", 0) for e in s.resources if e.get("name") == "CONTEXT_DESTROY_STARTING"]
    ends += [e.get("start", 0) for e in s.named(RESETS)]
    return min(ends) if ends else None


def cross_context_handle(s: Stream) -> list[Hit]:
    """A launch or function lookup failed with an invalid handle in one context while modules were loaded in
    another: a kernel (CuPy's kernel cache) loaded in one context used under another.

    Where the launch's function is known (its cuModuleGetFunction was recorded), the model decides: a function
    whose module was unloaded before is handle-destroyed's (the unload is the cause, not the context); one
    loaded in the launch's own context is not this rule's. The because is the change that made the launch's
    context current on its thread (another asyncio task's push over this one's, when they interleave), or the
    lookup that made the function in the other context where that came later."""
    candidates = [e for e in s.unsuccessful
                  if e.get("status") in INVALID_HANDLE and e.get("name", "").startswith(LAUNCH_OR_LOOKUP)]
    if not candidates:
        return []
    m = model(s)
    first_end = _first_end(s)
    loads = [e for e in s.events if e.get("context") and (e.get("name") == "MODULE_LOADED"
                                                           or e.get("name", "").startswith(MODULE_LOADS))]
    hits, seen = [], set()
    for e in candidates:
        if first_end is not None and first_end < e.get("start", 0):
            continue  # after a reset or destroy, a stale handle is that rule's finding
        ctx, at = e.get("context"), e.get("start", 0)
        function = (e.get("args") or {}).get("function")
        known = m.handle("function", function, at) if function else None
        if known is not None and (known.gone is not None and known.gone.get("start", 0) < at or known.context == ctx
                                  or not known.context):
            continue  # its module was unloaded (handle-destroyed), or it is this context's: not this rule's
        elsewhere = [x for x in loads if x.get("start", 0) < at and x["context"] != ctx]
        if known is not None:
            elsewhere = [known.made]
        elif _unloaded_before(s, at):
            continue  # a module was unloaded before and the function is not known: which one it was is not known
        if not ctx or not elsewhere or (e.get("tid"), ctx) in seen:
            continue
        seen.add((e.get("tid"), ctx))
        other = elsewhere[-1]
        change = m.current_change(e.get("tid"), at)
        il = causes.interleave(m, e, change)
        if il is not None and (il.mine.get("args") or {}).get("ctx") == other.get("context"):
            text = (f"{e['name']} returned {e['status']} in context {ctx:#x} on thread {thread_of(e)}: its function "
                    f"came from context {other['context']:#x}, which this code had pushed, but "
                    f"{causes.interleave_text(il)}. Tasks that share a thread share its context stack: push and pop "
                    f"without an await between, or give each task's work a context of its own thread")
        else:
            text = (f"{e['name']} returned {e['status']} in context {ctx:#x} on thread {thread_of(e)}; "
                    + (f"its function {function:#x} was made in context {other['context']:#x} by {on(other)}"
                       if known is not None else f"modules were loaded in another context ({other['context']:#x})")
                    + ": a function or kernel handle (CuPy's compiled-kernel cache is per device, not per context) "
                      "used in a context it was not loaded in")
        if change is not None and change.at > other.get("start", 0) and change.context == ctx:
            because = causes.current_context(m, e, f"the function was made in context {other['context']:#x}")
        else:
            because = Cause(other, f"{on(other)} made the {'function' if known is not None else 'module'} in context "
                                   f"{other['context']:#x}, and context {ctx:#x} was current at the launch")
        label = "function made at" if known is not None else "module loaded at"
        hits.append(Hit(e, text, calls=(other, e), related=((label, other),), **because.hit_fields()))
    return hits


def _unloaded_before(s: Stream, at: int) -> bool:
    return any(c.get("name", "").startswith("cuModuleUnload") and c.get("start", 0) < at and ok_or_pending(c)
               for c in s.calls)


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


def several_runtime_copies(s: Stream) -> list[Hit]:
    """More than one copy of the CUDA runtime initialised on the same primary context: each retains it.

    A retain the tracer kept the native callers of (``callers``: shared objects, innermost first) names its copy:
    the first object past the driver. Two retains from the same object are one copy retaining again, not two."""
    first_end = _first_end(s)
    by_context: dict = {}
    for e in s.named(("cuDevicePrimaryCtxRetain",)):
        if not e.get("name", "").startswith("cuDevicePrimaryCtxRetain") or not ok_or_pending(e):
            continue
        if first_end is not None and e.get("start", 0) > first_end:
            continue  # a runtime retaining again after a reset is the same copy
        if not _by_runtime(s, e):
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
    greens = set(green_contexts(s))
    shared = greens | primary_handles(s.events) if greens else set()
    destroyed = {e.get("context"): e for e in s.resources if e.get("name") == "CONTEXT_DESTROY_STARTING"}
    hits, seen = [], set()
    for e in s.observed:
        if e.get("name") != FOREIGN_POINTER:
            continue
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
    greens = green_contexts(s)
    if not greens:
        return []
    for handle in primary_handles(s.events) & set(greens):
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
                what = ("made by cuGreenCtxCreate" if made.get("green_of") else
                        f"cuCtxFromGreenCtx's handle {made.get('green', 0):#x}")
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




def _green_cause(s: Stream, a: dict, handle: int) -> Cause:
    """What made a green context current on the first thread (and nothing there popped it)."""
    change = model(s).current_change(a.get("tid"), a.get("start", 0) + 1)
    if change is None or change.context != handle:
        return Cause(a, f"{on(a)} ran with green context {handle:#x} current (what made it current there is not "
                        f"in the record)")
    return Cause(change.event, f"{on(change.event)} made green context {handle:#x} current there, and that thread "
                               f"had not popped it when the other made it current")
