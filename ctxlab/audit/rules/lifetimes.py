"""Predicates of the rules about a context's life: made where nothing uses it, never let go, used after it
was destroyed. Each reads the facts of the stream (``ctxlab.audit.model.facts``); messages name what was seen."""

from __future__ import annotations

from ctxlab.audit.engine import Hit, Stream, succeeded, thread_of
from ctxlab.audit.model.causes import Cause, missing, on
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules.rule import Rule


def _caller(s: Stream, e: dict) -> str:
    """Who made the call: the library whose Python code called into CUDA, or the runtime call around it."""
    outer = s.enclosing_runtime(e)
    library = (outer or e).get("library") or e.get("library")
    call = (outer or e).get("name", "?")
    return f"{call} (from {library})" if library else call


def stray_context(s: Stream) -> list[Hit]:
    """A primary context made on a device where no kernel, copy or memset ever ran: it holds GPU memory (and
    the device) for nothing."""
    f = model(s).facts
    hits = []
    for ctx, made in f.made.items():
        if ctx not in f.primary or ctx in f.worked or ctx in f.destroyed or ctx in f.green:
            continue
        if made.get("asked_by"):  # made on a library's own thread while this Python thread waited on it
            made = {**made, "thread": made["asked_by"]}
        maker = s.enclosing_runtime(made) or s.enclosing(made, ("cuDevicePrimaryCtxRetain", "cuInit")) or made
        device = f.device.get(ctx)
        where = f"GPU {device}" if device is not None else "a GPU"
        allocations = sum(1 for e in s.calls if e.get("context") == ctx and e.get("name", "").startswith(
            ("cuMemAlloc", "cudaMalloc")) and succeeded(e))
        held = (f"; {allocations} allocation(s) were made in it" if allocations else "")
        own = " (on a thread of the library's own)" if made.get("asked_by") else ""
        hits.append(Hit(made if made.get("stack") else maker,
                        f"{_caller(s, made)} on thread {thread_of(made)}{own} created the primary context {ctx:#x} on "
                        f"{where}, and no kernel, copy or memset ever ran in it{held}: the context holds GPU memory "
                        f"(hundreds of MiB) and shows in nvidia-smi for the life of the process. A CPU-only "
                        f"program should not touch the CUDA API (JAX_PLATFORMS=cpu, CUDA_VISIBLE_DEVICES=, no "
                        f"torch.cuda calls), and a helper thread should call set_device for the GPU it serves "
                        f"before any CUDA call", calls=(maker, made), cause=maker,
                        cause_what=f"{_caller(s, made)} on thread {thread_of(made)} created the primary context "
                                   f"{ctx:#x}, and no later call ran work in it"))
    return hits


STRAY_CONTEXT_RULE = Rule(
    "stray-context", "warning", "A context on a device where nothing ran",
    "A library made the primary context of a GPU (cudaSetDevice, cudaMemGetInfo, torch.cuda.synchronize, "
    "a JAX backend) and no kernel, copy or memset ever ran in it: the context holds GPU memory and the device "
    "for the life of the process (found through nvidia-smi or an out-of-memory error elsewhere). Keep "
    "CPU-only programs off the CUDA API and have helper threads select their GPU before any CUDA call.",
    "lifecycle.set-device-initialises", stray_context,
    "Judges primary contexts made while tracing: a context made before tracing began, or one whose only use "
    "is a kernel launched through a graph the tracer cannot see, is not judged; memory it holds is not "
    "measured (the allocations made in it are counted).",
    superseded_by=("non-primary-current", "*fork-after-init"))


def _stack_of(per_thread: dict, tid) -> list:
    return per_thread.setdefault(tid, [])


STACK_CALLS = ("cuCtxCreate", "cuCtxPushCurrent", "cuCtxSetCurrent", "cuCtxPopCurrent", "cuCtxDestroy")


def context_leak(s: Stream) -> list[Hit]:
    """Contexts pushed and never popped on a thread that ended, a pop that took another context than the
    thread pushed, and created contexts never destroyed."""
    f = model(s).facts
    hits: list[Hit] = []
    stacks: dict = {}  # tid -> [(ctx, call that put it there, how: push/create/set, replaced push or None)]
    last_push: dict = {}  # (tid, ctx) -> the last push or create of it on that thread, popped or not
    for e in s.named(STACK_CALLS):
        if e.get("domain") != "driver" or not succeeded(e) or e.get("from") == "callback":
            continue
        name, args = e.get("name", ""), e.get("args") or {}
        stack = _stack_of(stacks, e.get("tid"))
        if name.startswith("cuCtxCreate") and args.get("ctx"):
            stack.append((args["ctx"], e, "create", None))
            last_push[(e.get("tid"), args["ctx"])] = e
        elif name.startswith("cuCtxPushCurrent") and args.get("ctx"):
            stack.append((args["ctx"], e, "push", None))
            last_push[(e.get("tid"), args["ctx"])] = e
        elif name.startswith("cuCtxSetCurrent"):
            replaced = stack.pop() if stack else None
            lost = None  # the push a replacement hides: the pop meant for it will take another context
            if replaced is not None:
                lost = replaced if replaced[2] in ("push", "create") else replaced[3]
            if args.get("ctx"):
                stack.append((args["ctx"], e, "set", lost))
        elif name.startswith("cuCtxPopCurrent"):
            top = stack.pop() if stack else None
            mine = not e.get("library") and top is not None and not top[1].get("library")  # the program's own
            if mine and top is not None and top[2] == "set" and top[3] is not None and top[3][0] != args.get("ctx"):
                lost = top[3]
                hits.append(Hit(e, f"cuCtxPopCurrent on thread {thread_of(e)} popped context {args.get('ctx', 0):#x}, "
                                   f"not the context {lost[0]:#x} this thread pushed with {lost[1]['name']}: "
                                   f"{top[1]['name']} replaced it on the stack in between. The push is never "
                                   f"popped and the code that popped holds another context than it believes",
                                calls=(lost[1], top[1], e), related=(("pushed at", lost[1]), ("replaced at", top[1])),
                                cause=top[1], cause_what=f"{on(top[1])} replaced context {lost[0]:#x}, pushed by "
                                                         f"{lost[1]['name']}, on the thread's stack with context "
                                                         f"{args.get('ctx', 0):#x}"))
        elif name.startswith("cuCtxDestroy") and args.get("ctx"):
            if stack and stack[-1][0] == args["ctx"]:
                stack.pop()  # destroying the current context pops it
    ended = {e.get("tid") for e in s.observed if e.get("name") == "THREAD_ENDED"}
    for tid, stack in stacks.items():
        if tid not in ended:
            continue
        leftovers = [entry for entry in stack if entry[2] in ("push", "create") and f.is_created(entry[0])]
        for ctx in dict.fromkeys(entry[0] for entry in leftovers):
            last = last_push.get((tid, ctx)) or [entry for entry in leftovers if entry[0] == ctx][-1][1]
            depth = sum(1 for entry in stack if entry[0] == ctx)
            hits.append(Hit(last, f"thread {thread_of(last)} ended with context {ctx:#x} still on its context stack "
                                  f"({depth} time(s); the last {last['name']} here was never popped): a thread's "
                                  f"stack goes with it, so the context stays retained and its memory held until "
                                  f"someone destroys it. Pop what you push (try/finally) before the thread ends",
                            calls=(last,), **_thread_end(s, tid, ctx).hit_fields()))
    for ctx, made in f.created.items():
        if ctx in f.destroyed or not f.is_created(ctx):
            continue
        hits.append(Hit(made, f"{made['name']} on thread {thread_of(made)} created context {ctx:#x}, which was never "
                              f"destroyed: its memory, modules and streams stay allocated until the process ends "
                              f"(one per request or per thread adds up). cuCtxDestroy it when done",
                        calls=(made,), **missing(f"no cuCtxDestroy of context {ctx:#x} was recorded while tracing, on "
                                                 f"any thread").hit_fields()))
    return hits


CONTEXT_LEAK_RULE = Rule(
    "context-leak", "warning", "A context pushed and never popped, popped wrongly, or never destroyed",
    "A context the program created stays alive until cuCtxDestroy: one made per request or per thread and "
    "never destroyed holds its memory for good. A thread that ends with contexts pushed leaves them retained; "
    "a cuCtxSetCurrent between a push and its pop makes the pop take another context. Pop in finally, destroy "
    "what you create.",
    "refcount.thread-exit", context_leak,
    "Follows each thread's context stack from its own push, pop, set and create calls made while tracing "
    "(not those a runtime makes beneath its calls); a thread still running when tracing stops is not judged "
    "for what it left pushed; contexts made before tracing began are not known.")


def _thread_end(s: Stream, tid, ctx: int) -> Cause:
    """A thread that ended with a context pushed: its end (located at its last call with a stack)."""
    end = next((e for e in s.observed if e.get("name") == "THREAD_ENDED" and e.get("tid") == tid), None)
    if end is None:
        return missing("the thread's end was not recorded")
    return Cause(end, f"thread {thread_of(end)} ended with context {ctx:#x} pushed: no pop for it was recorded on "
                      f"that thread")


def used_after_teardown(s: Stream) -> list[Hit]:
    """A call that uses memory, a stream or an event of a context the program destroyed or released to zero
    before (a destructor or an atexit handler running after the teardown)."""
    f = model(s).facts
    gone = {ctx: call for ctx, call in f.destroyed.items()
            if call.get("domain") == "driver" or call.get("domain") == "resource"}
    if not gone:
        return []
    hits, seen = [], set()

    def report(e: dict, owner: int, what: str) -> None:
        cause = gone[owner]
        if cause.get("start", 0) >= e.get("start", 0) or e.get("context") == owner or (e.get("tid"), owner) in seen:
            return  # before the destroy, or still current here (destroyed-while-current's case)
        seen.add((e.get("tid"), owner))
        hits.append(Hit(e, f"{e['name']} on thread {thread_of(e)} returned {e.get('status')}: it used {what} of "
                           f"context {owner:#x}, which {cause.get('name', '?')} on thread {thread_of(cause)} had "
                           f"destroyed before. Free memory and destroy streams and events before their context goes "
                           f"(close them explicitly; do not leave it to __del__ or atexit order)",
                        calls=(cause, e), related=(("destroyed at", cause),), cause=cause,
                        cause_what=f"{on(cause)} destroyed context {owner:#x}, which {what} belonged to"))

    m = model(s)  # its allocations: each block with its context, live or freed
    for e in s.calls:
        args = e.get("args") or {}
        if e.get("domain") != "driver" or e.get("from") == "callback":
            continue
        ptr, at = args.get("ptr"), e.get("start", 0)
        if ptr and not (e.get("name", "").startswith("cuMemAlloc") and succeeded(e)):
            block = m.block(ptr, at)  # the allocation that held it, if it was still live then (or freed by e)
            if block is not None and block.context in gone and (
                    block.freed is None or block.freed is e or block.freed.get("start", 0) >= at):
                report(e, block.context, f"memory at {ptr:#x}")
        for key, table in (("stream", f.streams), ("event", f.events)):
            handle = args.get(key)
            owned = f.owner(table, handle, e.get("start", 0)) if handle else None
            if owned is not None and owned[0] in gone:
                report(e, owned[0], f"{key} {handle:#x}")
    return hits


USED_AFTER_TEARDOWN_RULE = Rule(
    "used-after-teardown", "error", "Memory, a stream or an event used after its context was destroyed",
    "Destroying a context (cuCtxDestroy, releasing the primary context to zero) frees its memory, streams and "
    "events. A destructor or an atexit handler that frees or uses them afterwards gets "
    "CUDA_ERROR_INVALID_CONTEXT or CUDA_ERROR_CONTEXT_IS_DESTROYED, often at exit, where nobody looks.",
    "refcount.after-last-release", used_after_teardown,
    "Follows pointers of allocations, streams and events made while tracing; the calls of the program's "
    "teardown (its globals let go, atexit handlers) are traced, the interpreter's own finalisation is not.")
