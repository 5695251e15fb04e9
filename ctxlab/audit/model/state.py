"""A model of the program's CUDA state, replayed from the recorded calls in time order, and the state each
failing call met: the thread's current context (none, primary of device N, created, green; who made it;
destroyed, released or reset), the device its runtime has set, the contexts and lives of the handles the call
passes (stream, event, module, function, memory), whether that context already held a sticky error, which
streams were capturing a graph, and who made the call (the program itself or a library, and whether a call
around it succeeded: a probe the library handled).

The rules read it (``model(stream)``); findings follow from it, and the rules only name causes. Nothing here
is guessed from a function's name beyond what the driver documents each call to do.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ctxlab.audit.engine import ANSWERS as ANSWERS  # the one definition of an answer, re-exported
from ctxlab.audit.engine import Stream, end_of, failed, ok_or_pending
from ctxlab.audit.events import ALLOCS, ASYNC_ALLOCS, HOOKED_LAUNCHES, base_name
from ctxlab.audit.model.call_roles import roles as roles_of
from ctxlab.audit.model.facts import Facts
from ctxlab.audit.model.hooks import LaunchReader
from ctxlab.audit.model.memory import Block, Memory, allocation_size

# Errors that poison a context: every later call into it returns the same error (the Driver API's list of
# "the context cannot be used anymore, and must be destroyed" statuses, and the runtime's names for them).
STICKY = frozenset({
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_TIMEOUT", "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ASSERT", "CUDA_ERROR_ECC_UNCORRECTABLE",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED_BY_FAULT",
    "cudaErrorIllegalAddress", "cudaErrorLaunchTimeout", "cudaErrorHardwareStackError", "cudaErrorIllegalInstruction",
    "cudaErrorMisalignedAddress", "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc", "cudaErrorLaunchFailure",
    "cudaErrorAssert", "cudaErrorECCUncorrectable"})
# Runtime calls that return an error made earlier (the thread's last), not a failure of their own.
ECHOES = ("cudaGetLastError", "cudaPeekAtLastError")
HANDLE_ROLES = (("stream", "stream"), ("event", "event"), ("end_event", "event"), ("module", "module"),
                ("function", "function"))
RUNTIME_OBJECTS = ("libcudart", "libcuda.so", "nvidia/cuda_runtime", "nvidia/cu13/lib/libcudart",
                   "nvidia/cu12/lib/libcudart")


failing = failed  # a call that returned anything but success or its documented answer (engine.ANSWERS)


@dataclass
class Handle:
    """A stream, event, module or function the program made while tracing, with its life."""

    kind: str
    value: int
    context: int
    made: dict
    gone: dict | None = None  # the call that destroyed or unloaded it (a function: its module's unload)
    parent: int = 0  # a function's module (cuModuleGetFunction's hmod), 0 where not known


@dataclass
class Capture:
    """A stream capturing a CUDA graph, from its begin call to its end call (None while capturing)."""

    stream: int
    mode: int | None  # 0 global, 1 thread-local, 2 relaxed (CUstreamCaptureMode)
    begin: dict
    end: dict | None = None

    def covers(self, t: int) -> bool:
        """Whether the capture was in progress at time ``t``."""
        return self.begin.get("start", 0) <= t and (self.end is None or t <= self.end.get("start", 0))


CAPTURE_MODES = {0: "global", 1: "thread-local", 2: "relaxed"}


@dataclass(frozen=True)
class Change:
    """A change of a thread's current context: the call that made it (the runtime call around a driver call the
    runtime made), the context current after it (0: none), and the entry it covered or uncovered (the context
    beneath a push, or the one a pop took off, with the change that had put it there)."""

    at: int
    context: int
    event: dict
    how: str  # push, pop, set, create, destroy
    other: tuple[int, dict | None] | None = None


@dataclass
class CallState:
    """What a call met: see the module docstring."""

    event: dict
    context: int
    context_kind: str  # none, primary, created, green, unknown
    device: int | None
    context_gone: dict | None  # the call that destroyed, released or reset its current context
    runtime_device: int | None  # the device the thread's runtime last set (cudaSetDevice)
    handles: list[tuple[str, int, Handle | None]]  # (role, value, what the model knows of it)
    blocks: list[tuple[str, int, Block | None]]  # (role, address, the allocation holding it, freed ones too)
    sticky: dict | None  # the context's first sticky error before this call
    captures: list[Capture]  # captures in progress at the call
    library: str | None  # who made the call: None for the program's own code
    handled_by: dict | None  # a call around it that succeeded: the library handled the failure
    same_as: dict | None = None  # the failing call this one repeats: its runtime call around it, or the error a
    # cudaGetLastError hands back

    def describe(self) -> str:
        """The state in one sentence, for a finding."""
        if self.context_kind == "none":
            where = "no context was current on its thread"
        else:
            kind = {"primary": f"the primary context of GPU {self.device}" if self.device is not None
                    else "a primary context", "created": "a context made by cuCtxCreate",
                    "green": "a green context", "unknown": "a context made before tracing began"}[self.context_kind]
            where = f"the current context was {kind} ({self.context:#x})"
            if self.context_gone is not None:
                where += f", already destroyed by {self.context_gone.get('name', '?')}"
        parts = [where]
        if self.runtime_device is not None:
            parts.append(f"the thread's runtime device was {self.runtime_device}")
        for role, value, known in self.handles:
            if known is None:
                parts.append(f"its {role} {value:#x} was not made while tracing")
            elif known.gone is not None and known.gone.get("start", 0) < self.event.get("start", 0):
                parts.append(f"its {role} {value:#x} had been destroyed ({known.gone.get('name')})")
            elif known.context and known.context != self.context:
                parts.append(f"its {role} {value:#x} belongs to context {known.context:#x}")
        for role, address, block in self.blocks:
            if block is None:
                parts.append(f"its {role} {address:#x} lies in no allocation made while tracing")
            elif block.freed is not None and block.freed.get("start", 0) < self.event.get("start", 0):
                parts.append(f"its {role} {address:#x} lies in a {block.size}-byte allocation already freed")
            elif block.context and self.context and block.context != self.context:
                parts.append(f"its {role} {address:#x} lies in memory of context {block.context:#x}")
        if self.sticky is not None:
            parts.append(f"the context already held {self.sticky.get('status')} (sticky)")
        for capture in self.captures:
            mode = CAPTURE_MODES.get(capture.mode, "?") if capture.mode is not None else "?"
            parts.append(f"stream {capture.stream:#x} was capturing a graph ({mode} "
                         f"mode) on thread {capture.begin.get('thread', '?')}")
        return "; ".join(parts)


def caller_of(event: dict, stream: Stream) -> tuple[str | None, dict | None]:
    """Who made a call (None: the program's own code) and the call around it that succeeded, if any.

    A driver call the runtime made beneath one of its own calls is the runtime's; a call whose native caller
    is a library's object (``callers``, innermost first) is that library's; a call through cuda.bindings is
    made by the Python code that called it (a library's package, or the program)."""
    outer = stream.enclosing_runtime(event) if event.get("domain") == "driver" else None
    if event.get("from") == "callback" or outer is not None:
        handled = outer if outer is not None and ok_or_pending(outer) else None
        return "the CUDA runtime", handled
    for path in event.get("callers") or ():
        if path.startswith(RUNTIME_OBJECTS) or "libcudart" in path:
            continue
        top = path.split("/")[0]
        if top == "cuda":  # cuda.bindings, called from Python: the Python caller decides
            return event.get("library") or None, None
        return {"cupy_backends": "cupy", "jaxlib": "jax", "jax_plugins": "jax", "nvidia": path.split("/")[1]
                if "/" in path else "nvidia"}.get(top, top.split(".")[0]), None
    return event.get("library") or None, None


@dataclass
class Model:
    """The replayed state (see the module docstring)."""

    facts: Facts = field(default_factory=Facts)  # fed in the same pass (one_pass.Models)
    states: dict[int, CallState] = field(default_factory=dict)  # id(event) -> state, for every failing call
    handles: dict[tuple[str, int], list[Handle]] = field(default_factory=dict)
    memory: Memory = field(default_factory=Memory)  # the one allocation map, shared with the ordering model
    foreign: list[dict] = field(default_factory=list)  # notes: launch arguments into another context's memory
    launches_read: LaunchReader = field(default_factory=LaunchReader)
    captures: list[Capture] = field(default_factory=list)
    sticky: dict[int, dict] = field(default_factory=dict)  # context -> its first sticky error
    launches: dict[int, list[dict]] = field(default_factory=dict)  # context -> launches that returned success
    synced: dict[int, list[int]] = field(default_factory=dict)  # context -> times of successful full syncs
    groups: dict[int, int] = field(default_factory=dict)  # id(failing call) -> id of the first call of its failure
    members: dict[int, list[dict]] = field(default_factory=dict)  # id(first call) -> every call of that failure
    changes: dict = field(default_factory=dict)  # tid -> [Change] in time order: what made each context current
    _change_ats: dict = field(default_factory=dict)  # tid -> the changes' times (current_change bisects them)
    _stacks: dict = field(default_factory=dict)  # tid -> [(context, the change that put it there)] while replaying
    # tid -> (starts, contexts) of its calls in time order: the context the callback saw current at each call
    _seen: dict[object, tuple[list[int], list[int]]] = field(default_factory=dict)
    _first_seen: dict[object, int] = field(default_factory=dict)  # tid -> start of its first call with a context

    def current_change(self, tid, at: int) -> Change | None:
        """The last change of the thread's current context before time ``at`` (what left it current then)."""
        i = bisect.bisect_left(self._change_ats.get(tid, ()), at)
        return self.changes[tid][i - 1] if i else None

    def saw(self, e: dict) -> None:
        """A call, in time order: the context current at it, as the callback recorded it."""
        tid, at, ctx = e.get("tid"), e.get("start", 0), e.get("context") or 0
        starts, contexts = self._seen.setdefault(tid, ([], []))
        starts.append(at)
        contexts.append(ctx)
        if ctx and tid not in self._first_seen:
            self._first_seen[tid] = at

    def had_context_before(self, tid, before: int) -> bool:
        """Whether any call on the thread before this time ran with a context current."""
        return self._first_seen.get(tid, before) < before

    def last_context(self, tid, before: int) -> int:
        """The context the thread had with its last call that started before this time (0: none)."""
        starts, contexts = self._seen.get(tid, ([], []))
        i = bisect.bisect_left(starts, before)
        return contexts[i - 1] if i else 0

    def failure_of(self, event: dict) -> list[dict]:
        """Every call of the one failure this call belongs to (a runtime call, the driver calls beneath it that
        failed with it, the cudaGetLastError calls that handed its error back)."""
        return self.members.get(self.groups.get(id(event), id(event)), [event])

    def failed_calls(self) -> list[dict]:
        """The failing calls, in time order (the replay meets them in that order): what a rule about failures
        reads instead of every call."""
        return [state.event for state in self.states.values()]

    def expand(self, ids: set[int]) -> set[int]:
        """``ids`` with every call of each failure one of them belongs to."""
        out = set(ids)
        for known in list(ids):
            group = self.groups.get(known)
            if group is not None:
                out.update(id(e) for e in self.members.get(group, ()))
        return out

    def handle(self, kind: str, value: int, at: int) -> Handle | None:
        """The handle of this kind and value that existed (or had existed) at time ``at``: made by a call that
        had returned by then (another thread's create may be under way)."""
        found = None
        for h in self.handles.get((kind, value), ()):
            if end_of(h.made) <= at:
                found = h
        return found

    @property
    def blocks(self) -> list[Block]:
        """Every allocation made while tracing, live or freed, in the order made."""
        return self.memory.made

    def block(self, address: int, at: int) -> Block | None:
        """The allocation (live or freed before ``at``) that held ``address`` last before ``at``: made by a call
        that had returned by then."""
        return self.memory.allocation_at(address, at)

    def summary(self) -> dict:
        """The counts of the audit's stats: launches read, foreign arguments, allocations, green contexts."""
        return {**self.launches_read.counts, "allocations_seen": len(self.memory.made),
                "green_contexts": len(self.facts.green)}

    def launches_before(self, context: int, at: int, limit: int = 6) -> list[dict]:
        """The launches into ``context`` after its last successful full synchronisation before ``at``, newest
        first (the kernels a sticky error surfacing at ``at`` can have come from)."""
        syncs = self.synced.get(context, [])
        i = bisect.bisect_left(syncs, at)
        since = syncs[i - 1] if i else 0
        out = [e for e in self.launches.get(context, ()) if since <= e.get("start", 0) < at]
        return out[::-1][:limit]


OUT_OF_MEMORY = ("CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation")


def retried(m: Model, s: Stream) -> None:
    """An allocation that ran out of memory and that the library made again, of the same size from the same
    line, successfully (PyTorch's and CuPy's pools free their cache and retry): the library handled it."""
    for e in s.calls:
        state = m.states.get(id(e))
        if state is None or state.handled_by is not None or not str(e.get("status")).startswith(OUT_OF_MEMORY):
            continue
        size, line = (e.get("args") or {}).get("size"), (e.get("stack") or [[None, None]])[0][:2]
        for later in s.by_tid.get(e.get("tid"), ()):
            if later.get("start", 0) <= e.get("start", 0) or later.get("name") != e.get("name"):
                continue
            if ok_or_pending(later) and (later.get("args") or {}).get("size") == size and \
                    (later.get("stack") or [[None, None]])[0][:2] == line:
                state.handled_by = later
                break


def group(m: Model, s: Stream) -> None:
    """One failure, one group: a driver call that failed beneath a runtime call that failed too is the runtime
    call's failure; cudaGetLastError handing back an error is the failure that made it (the thread's last)."""
    last_runtime: dict = {}  # tid -> the thread's last failing runtime call that is not an echo
    for e in s.calls:
        state = m.states.get(id(e))
        if state is None:
            continue
        same = None
        if e.get("domain") == "driver":
            outer = s.enclosing_runtime(e)
            if outer is not None and id(outer) in m.states:
                same = outer
        elif e.get("name", "").startswith(ECHOES):
            same = last_runtime.get(e.get("tid"))
        else:
            last_runtime[e.get("tid")] = e
        state.same_as = same
        root = m.groups.get(id(same), id(same)) if same is not None else id(e)
        m.groups[id(e)] = root
        m.members.setdefault(root, []).append(e)  # a group's first call comes first: calls are in time order


def _kind(f: Facts, ctx: int) -> str:
    if not ctx:
        return "none"
    if ctx in f.green:
        return "green"
    if ctx in f.primary:
        return "primary"
    if ctx in f.created:
        return "created"
    return "unknown"


def replay(m: Model, s: Stream, e: dict, runtime_device: dict) -> None:
    """One call (not a resource event or a note) taken into the model, in time order."""
    name = e.get("name", "")
    roles = roles_of(name)
    if failing(e):
        ctx = e.get("context") or 0
        m.states[id(e)] = _state(m, s, e, runtime_device)
        status = e.get("status")
        if status in STICKY and ctx and ctx not in m.sticky:
            m.sticky[ctx] = e
    elif not roles.any:
        return  # a call that changes nothing the model holds
    args, ctx, at = e.get("args") or {}, e.get("context") or 0, e.get("start", 0)
    if roles.end_capture and "stream" in args:
        for capture in m.captures:  # a capture ends with its end call, whether or not that call succeeded
            if capture.stream == args["stream"] and capture.end is None:
                capture.end = e
    if not ok_or_pending(e):
        return
    nested = e.get("from") == "callback"
    if e.get("domain") == "driver" and roles.context_change:
        _changed(m, s, e, name, args)
    if roles.set_device and "device" in args:
        runtime_device[e.get("tid")] = args["device"]
    if name in HOOKED_LAUNCHES and ctx and e.get("status") == "CUDA_SUCCESS":
        _read_arguments(m, e)  # a launch that failed ran no kernel, and read nothing
    if roles.launch and ctx and not (nested and name.startswith("cuLaunch") and _covered(s, e)):
        m.launches.setdefault(ctx, []).append(e)
    elif roles.sync and ctx:
        m.synced.setdefault(ctx, []).append(end_of(e))
    for kind, _prefix, key in roles.makes:
        if args.get(key):
            parent = args.get("module", 0) if kind == "function" else 0
            m.handles.setdefault((kind, args[key]), []).append(Handle(kind, args[key], ctx, e, parent=parent))
    for kind, _prefix, key in roles.gones:
        if args.get(key):
            known = m.handle(kind, args[key], at)
            if known is not None and known.gone is None:
                known.gone = e
            if kind == "module":  # its functions go with it
                for (other, _), made in m.handles.items():
                    for h in made if other == "function" else ():
                        if h.parent == args[key] and h.gone is None and end_of(h.made) <= at:
                            h.gone = e
    if roles.alloc and args.get("ptr"):  # the runtime's and the driver's beneath it are one block (memory.py)
        # the ordering follows device memory the program allocated (not pinned host memory, not the runtime's own)
        device = base_name(name) in ALLOCS or base_name(name) in ASYNC_ALLOCS
        m.memory.allocated(args["ptr"], allocation_size(args), e,
                           live=device and e.get("status") is not None and e.get("from") != "callback")
    elif roles.free and args.get("ptr"):
        # what it frees held the pointer when it began: an allocation returning the same address on another
        # thread while it runs is not it (the program had the pointer before it called)
        block = m.block(args["ptr"], e.get("start", 0))
        if block is not None and block.freed is None and block.base == args["ptr"]:
            block.freed = e
    elif roles.begin_capture and "stream" in args:
        if not (nested and _covered(s, e)):
            m.captures.append(Capture(args["stream"], args.get("mode"), e))




def _read_arguments(m: Model, e: dict) -> None:
    """A kernel launch's kept arguments read against the one allocation map: a word pointing into memory of
    another context, not destroyed before the launch, is a note for pointer-from-another-context."""
    def gone(block: Block) -> bool:  # its memory went with its context
        destroyed = m.facts.destroyed.get(block.context)
        return destroyed is not None and destroyed.get("start", 0) < e.get("start", 0)

    m.foreign += m.launches_read.read(e, m.memory, gone)


def _changed(m: Model, s: Stream, e: dict, name: str, args: dict) -> None:
    """A successful push, pop, set, create or destroy: the thread's context stack after it, as a Change."""
    tid, at = e.get("tid"), e.get("start", 0)
    stack = m._stacks.setdefault(tid, [])
    cause = (s.enclosing_runtime(e) or e) if e.get("from") == "callback" else e
    ctx, other = args.get("ctx") or 0, None
    if name.startswith(("cuCtxPushCurrent", "cuCtxCreate")) and ctx:
        other = stack[-1] if stack else None
        stack.append((ctx, None))
        how = "push" if name.startswith("cuCtxPush") else "create"
    elif name.startswith("cuCtxPopCurrent"):
        other = stack.pop() if stack else (ctx, None)
        how = "pop"
    elif name.startswith("cuCtxSetCurrent"):
        other = stack.pop() if stack else None
        if ctx:
            stack.append((ctx, None))
        how = "set"
    elif name.startswith("cuCtxDestroy") and stack and stack[-1][0] == ctx:
        other = stack.pop()
        how = "destroy"
    else:
        return
    change = Change(at, stack[-1][0] if stack else 0, cause, how, other)
    if stack and how in ("push", "create", "set"):
        stack[-1] = (stack[-1][0], cause)
    m.changes.setdefault(tid, []).append(change)
    m._change_ats.setdefault(tid, []).append(at)


def _covered(s: Stream, e: dict) -> bool:
    """A driver call made beneath a runtime call that stands for it (the runtime's launch, its capture)."""
    outer = s.enclosing_runtime(e)
    return outer is not None


def _state(m: Model, s: Stream, e: dict, runtime_device: dict) -> CallState:
    args, ctx, at = e.get("args") or {}, e.get("context") or 0, e.get("start", 0)
    handles = []
    for role, kind in HANDLE_ROLES:
        value = args.get(role)
        if value:
            handles.append((role, value, m.handle(kind, value, at)))
    blocks = []
    for role in ("ptr", "src"):
        value = args.get(role)
        if value and not e.get("name", "").startswith(("cuMemAlloc", "cudaMalloc")):
            blocks.append((role, value, m.block(value, at)))
    library, handled = caller_of(e, s)
    # what kind of context it was, its device and its destroyer are settled after the pass (``classify``)
    return CallState(event=e, context=ctx, context_kind="unknown", device=None, context_gone=None,
                     runtime_device=runtime_device.get(e.get("tid")), handles=handles, blocks=blocks,
                     sticky=m.sticky.get(ctx), captures=[c for c in m.captures if c.covers(at)], library=library,
                     handled_by=handled)


def classify(m: Model) -> None:
    """After the pass, with the facts of the whole run: each failing call's context by kind (none, primary,
    created, green, unknown), its device, and the call that destroyed it before this one."""
    f = m.facts
    for state in m.states.values():
        ctx, at = state.context, state.event.get("start", 0)
        state.context_kind, state.device = _kind(f, ctx), f.device.get(ctx)
        gone = f.destroyed.get(ctx) if ctx else None
        state.context_gone = gone if gone is not None and gone.get("start", 1 << 62) < at else None
