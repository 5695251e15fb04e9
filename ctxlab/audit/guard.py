"""The pytest guard's decisions, over what one test did (``pytest --ctxlab-guard``).

Pure functions over recorded events and two snapshots (before the test's setup, after its teardown),
so they are tested on CPU with synthetic events. A test fails the guard when it:

- leaks a context: a ``CONTEXT_CREATED`` made by cuCtxCreate or cuGreenCtxCreate during the test with
  no ``CONTEXT_DESTROY_STARTING`` for it before the test ended (primary contexts, which the runtime
  makes and keeps for the process, are not leaks);
- leaves another context current on its thread: the context current after it is neither the one
  current before nor a primary context (a library binding the primary context is normal);
- leaves a primary context inactive that was active before (a release or reset under later tests);
- triggers a hazard of severity error (the audit's rules).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlab.audit.engine import NOT_CALLS, Location, Stream, frames
from ctxlab.audit.rules.catalogue import judge

CREATORS = ("cuCtxCreate", "cuGreenCtxCreate", "cuCtxFromGreenCtx")  # a green CUcontext may be made by either
PRIMARY_MAKERS = ("cuDevicePrimaryCtxRetain",)


@dataclass(frozen=True)
class Snapshot:
    """The thread's current context (0: none; None: CUDA not initialised, not asked) and each device's
    primary context: active or not, and its handle where active."""

    current: int | None = None
    primary_active: dict[int, bool] = field(default_factory=dict)
    primary_handles: frozenset[int] = frozenset()

    def as_text(self) -> str:
        """This as text for a person, one item a line."""
        cur = "not asked (CUDA not initialised)" if self.current is None else (
            f"{self.current:#x}" if self.current else "none")
        states = ", ".join(f"device {d}: {'active' if a else 'inactive'}"
                           for d, a in sorted(self.primary_active.items()))
        return f"current context {cur}; primary contexts: {states or 'not asked'}"


@dataclass(frozen=True)
class Problem:
    """Why the guard fails a test: a kind (context-leak, context-left-current, primary-deactivated, or
    an audit rule's id), one line, and the user's stack where known."""

    kind: str
    message: str
    stack: tuple[Location, ...] = ()

    def as_text(self) -> str:
        """This as text for a person, one item a line."""
        lines = [f"ctxlab guard: {self.kind}: {self.message}"]
        lines += [f"    at {frame} in {frame.function}" for frame in self.stack[:6]]
        return "\n".join(lines)


def _maker(stream: Stream, created: dict) -> dict | None:
    """The call that made a context: the call on the same thread whose span holds CONTEXT_CREATED, else the
    last call that thread started before it."""
    found = stream.enclosing(created, CREATORS + PRIMARY_MAKERS) or stream.enclosing_runtime(created)
    if found is not None:
        return found
    last = None
    for e in stream.by_tid.get(created.get("tid"), ()):
        if e.get("start", 0) > created.get("start", 0):
            break
        if e.get("domain") not in NOT_CALLS:
            last = e
    return last


def judge_test(events: list[dict], before: Snapshot, after: Snapshot,
               known_primary: set[int] | frozenset[int] = frozenset()) -> list[Problem]:
    """Why the test that made these events fails the guard (empty: it passes)."""
    stream = Stream(list(events))
    problems: list[Problem] = []
    destroyed = {e.get("context") for e in stream.resources if e.get("name") == "CONTEXT_DESTROY_STARTING"}
    primaries = set(known_primary) | set(after.primary_handles) | set(before.primary_handles)
    for e in stream.resources:
        if e.get("name") != "CONTEXT_CREATED" or not e.get("context"):
            continue
        maker = _maker(stream, e)
        if maker is None or not maker.get("name", "").startswith(CREATORS):
            primaries.add(e["context"])
            continue
        if e["context"] in destroyed:
            continue
        stack = frames(maker.get("stack")) or frames(e.get("stack"))
        problems.append(Problem("context-leak", f"{maker['name']} made context {e['context']:#x} on thread "
                                                f"{e.get('thread', '?')} and the test did not destroy it", stack))
    if after.current and after.current != before.current and after.current not in primaries:
        setter = None
        for c in stream.calls:
            if c.get("context") == after.current and c.get("name", "").startswith(
                    ("cuCtxCreate", "cuCtxPushCurrent", "cuCtxSetCurrent", "cuGreenCtx", "cuCtxFromGreenCtx")):
                setter = c
        was = f"{before.current:#x}" if before.current else "none"
        problems.append(Problem("context-left-current",
                                f"the test left context {after.current:#x} current on its thread (before it: {was})"
                                + (f"; made current by {setter['name']}" if setter else ""),
                                frames(setter.get("stack")) if setter else ()))
    for device, active in sorted(before.primary_active.items()):
        if active and after.primary_active.get(device) is False:
            problems.append(Problem("primary-deactivated",
                                    f"the primary context of device {device} was active before the test and is "
                                    f"inactive after it (released to zero or reset)"))
    for f in judge(events):
        if f.severity == "error":
            problems.append(Problem(f.rule, f"{f.message} (thread {f.thread}; calls: {'; '.join(f.calls)}; "
                                            f"evidence: {f.claim})", f.stack))
    return problems


def snapshot(initialised: bool) -> Snapshot:
    """The calling thread's current context and every primary context's state, through the driver; nothing
    is asked while CUDA is not initialised (asking would initialise it). A primary context's handle is read
    with a retain and a release only when it is active (a retain would create an inactive one)."""
    if not initialised:
        return Snapshot()
    from cuda.bindings import driver

    err, ctx = driver.cuCtxGetCurrent()
    current = int(ctx) if not int(err) else None
    active: dict[int, bool] = {}
    handles = set()
    err, count = driver.cuDeviceGetCount()
    for index in range(int(count) if not int(err) else 0):
        err, dev = driver.cuDeviceGet(index)
        if int(err):
            continue
        err, _flags, is_active = driver.cuDevicePrimaryCtxGetState(dev)
        if int(err):
            continue
        active[index] = bool(is_active)
        if is_active:
            err, handle = driver.cuDevicePrimaryCtxRetain(dev)
            if not int(err):
                handles.add(int(handle))
                driver.cuDevicePrimaryCtxRelease(dev)
    return Snapshot(current, active, frozenset(handles))
