"""Predicates of the rules about which context a thread has: none at all, one destroyed under it, the
primary context released or reset under a runtime, a kernel of one context launched in another (state shared
where it must not be is ``sharing.py``'s). Messages are built from the values observed (calls, statuses,
threads)."""

from __future__ import annotations

from ctxlab.audit.engine import Hit, Stream, call_text, end_of, failed, ok_or_pending, thread_of
from ctxlab.audit.events import ALLOCATION_PREFIXES
from ctxlab.audit.model import causes
from ctxlab.audit.model.causes import Cause, missing, on
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules.rule import Rule

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


def by_runtime(s: Stream, event: dict) -> bool:
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
        if e.get("name", "").startswith(CONTEXT_QUERIES) or by_runtime(s, e):
            continue  # a probe, or the runtime asking beneath its own call (it binds a context next)
        if e.get("tid") in seen or model(s).had_context_before(e.get("tid"), e.get("start", 0)):
            continue
        seen.add(e.get("tid"))
        hits.append(Hit(e, f"{e['name']} returned {INVALID_CONTEXT} on thread {thread_of(e)}, which never had a "
                           f"context current: a driver call needs one (cuCtxSetCurrent or cuCtxPushCurrent first, "
                           f"or a runtime call such as cudaSetDevice, which binds the primary context)",
                        **_elsewhere(s, e).hit_fields()))
    return hits


NO_CONTEXT_RULE = Rule(
    "no-context", "error", "A driver call on a thread that never had a context",
    "A thread starts with no current context. Driver API calls made there before cuCtxSetCurrent, "
    "cuCtxPushCurrent or a runtime call that binds the primary context return CUDA_ERROR_INVALID_CONTEXT.",
    "migrate.driver-call-without-context", no_context,
    "Queries (cuCtxGet*) are how libraries probe for a context and are not judged here; driver calls the "
    "runtime makes beneath its own calls are the runtime's (it binds a context next); a thread that had a "
    "context and let go of it is not judged (its failing calls are failed-call findings).")


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
            if e.get("context") != handle and model(s).last_context(e.get("tid"), d.get("start", 0)) != handle:
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


DESTROYED_WHILE_CURRENT_RULE = Rule(
    "destroyed-while-current", "error", "A context destroyed while current on another thread",
    "cuCtxDestroy does not unbind the context from other threads: it stays current there and every call "
    "they make into it returns CUDA_ERROR_CONTEXT_IS_DESTROYED. Hand the context back (pop it) on every "
    "thread before destroying it.",
    "refcount.destroy-while-current-elsewhere", destroyed_while_current,
    "Needs CUPTI's CONTEXT_DESTROY_STARTING event and a call on the other thread that fails afterwards; a "
    "thread that holds the destroyed context but makes no further call is not reported.")


def primary_released_under_runtime(s: Stream) -> list[Hit]:
    """cuDevicePrimaryCtxRelease took the count to zero (the context was destroyed inside it) while the runtime
    still used it: calls after it failed."""
    hits, seen = [], set()
    for r in s.named(("cuDevicePrimaryCtxRelease",)):
        if not r.get("name", "").startswith("cuDevicePrimaryCtxRelease") or not ok_or_pending(r):
            continue
        if by_runtime(s, r):
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
                       c.get("start", 0) < r.get("start", 0) and ok_or_pending(c) and by_runtime(s, c)), None)
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


PRIMARY_RELEASED_UNDER_RUNTIME_RULE = Rule(
    "primary-released-under-runtime", "error", "The primary context released to zero under the runtime",
    "The runtime holds a reference to the primary context it uses. A cuDevicePrimaryCtxRelease the program "
    "did not balance with a retain can take the count to zero: the context, its memory and modules are "
    "destroyed while the runtime (CuPy, PyTorch) still uses it, and its later calls fail.",
    "refcount.after-last-release", primary_released_under_runtime,
    "Sees the release that destroyed the context only through CUPTI's CONTEXT_DESTROY_STARTING inside the "
    "release call; needs runtime calls before it and failing calls after it; releases the runtime makes "
    "itself (inside cudaDeviceReset) are left to reset-with-live-allocations.")


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


RESET_WITH_LIVE_ALLOCATIONS_RULE = Rule(
    "reset-with-live-allocations", "error", "A device reset with allocations still in use",
    "cudaDeviceReset and cuDevicePrimaryCtxReset destroy every allocation, module and stream of the "
    "device's primary context, whoever else retains it. Pointers and cached kernels from before are invalid; "
    "calls that use them fail.",
    "refcount.device-reset-destroys", reset_with_live_allocations,
    "Cannot follow pointers: it reports a reset preceded by successful allocations and followed by failing "
    "calls, not which allocation each failing call used. Allocations made before tracing began are not seen.")


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


def first_teardown(s: Stream) -> int | None:
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
    teardown_at = first_teardown(s)
    loads = [e for e in s.events if e.get("context") and (e.get("name") == "MODULE_LOADED"
                                                           or e.get("name", "").startswith(MODULE_LOADS))]
    hits, seen = [], set()
    for e in candidates:
        if teardown_at is not None and teardown_at < e.get("start", 0):
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


CROSS_CONTEXT_HANDLE_RULE = Rule(
    "cross-context-handle", "error", "A kernel loaded in one context launched in another",
    "Modules and functions belong to the context they were loaded in. CuPy's compiled-kernel cache is per "
    "device: a kernel first used under one context and launched under another fails with "
    "CUDA_ERROR_INVALID_HANDLE. Use one context per device (the primary context), or the "
    "context-independent library API (cuLibraryLoad*).",
    "migrate.cupy-kernel-cache-across-contexts", cross_context_handle,
    "Cannot see which function handle a launch used: it relates an invalid-handle launch or lookup in one "
    "context to modules loaded in another. A launch's location is its own stack (the C callback takes one "
    "for every launch in an audit), else the uncaught exception that named the status, else the thread's "
    "last call with a Python stack (marked nearby). After a reset or destroy it leaves stale handles to "
    "those rules.")


def _unloaded_before(s: Stream, at: int) -> bool:
    return any(c.get("name", "").startswith("cuModuleUnload") and c.get("start", 0) < at and ok_or_pending(c)
               for c in s.calls)
