"""Settings are state too: the context- and process-wide settings a program and its libraries make (limits
through cuCtxSetLimit / cudaDeviceSetLimit, device and context flags, cache and shared memory configuration,
memory pool attributes), replayed from the recorded calls' kept parameters (``ctxlab.tracing.fields``) into
who set each (thread, library, line), when, to what, and which later calls depend on it.

``setting-changed-under``: a setting changed by one library (or thread) under another that set it to another
value before, or that relied on it (its dependent calls ran before the change, and one failed after it). The
finding is at the change; its because is the other's setting (or the call that relied on it), and the later
call of the other that then behaved differently is named beside it. ``settings_cause`` gives a failing call's
cause where a setting explains it (a dependent call after another's change; a limit that cannot change after a
kernel launched; flags that cannot change on an active context).

Not seen: ``CUDA_VISIBLE_DEVICES`` changed after CUDA started (the child does not hook ``os.environ``), settings
made before tracing began (their first recorded value is taken as the start), per-function attributes
(cuFuncSetAttribute, cuFuncSetCacheConfig).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlab.audit.engine import Hit, Stream, failed, ok_or_pending, succeeded, thread_of
from ctxlab.audit.events import CONTEXT_SYNC_PREFIXES, EVENT_SYNC_PREFIXES, LAUNCH_PREFIXES, STREAM_SYNC_PREFIXES
from ctxlab.audit.model.causes import Cause, on
from ctxlab.audit.model.state import caller_of
from ctxlab.audit.rules.rule import NO_CLAIM, Rule

LIMITS = {0: "stack size", 1: "printf FIFO size", 2: "malloc heap size", 3: "device runtime sync depth",
          4: "device runtime pending launch count", 5: "max L2 fetch granularity", 6: "persisting L2 cache size",
          7: "shared memory size"}
POOL_ATTRIBUTES = {1: "reuse follow event dependencies", 2: "reuse allow opportunistic",
                   3: "reuse allow internal dependencies", 4: "release threshold"}
INT_POOL_ATTRIBUTES = (1, 2, 3)  # int values: the kept 8 bytes' upper half is not theirs
# setting function prefix -> (kind, parameter holding the value)
SETTERS = {"cuCtxSetLimit": ("limit", "value"), "cudaDeviceSetLimit": ("limit", "value"),
           "cudaSetDeviceFlags": ("device flags", "flags"), "cuDevicePrimaryCtxSetFlags": ("device flags", "flags"),
           "cuCtxSetFlags": ("context flags", "flags"), "cuCtxSetCacheConfig": ("cache configuration", "config"),
           "cudaDeviceSetCacheConfig": ("cache configuration", "config"),
           "cuCtxSetSharedMemConfig": ("shared memory configuration", "config"),
           "cuMemPoolSetAttribute": ("pool attribute", "value"), "cudaMemPoolSetAttribute": ("pool attribute", "value")}
POOL_USERS = ("cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocFromPoolAsync", "cudaMallocAsync", "cudaFreeAsync",
              "cudaMallocFromPoolAsync")
# what depends on each kind: the calls whose behaviour the setting changes
HOST_WAITS = CONTEXT_SYNC_PREFIXES + STREAM_SYNC_PREFIXES + EVENT_SYNC_PREFIXES
DEPENDENTS = {"limit": LAUNCH_PREFIXES, "cache configuration": LAUNCH_PREFIXES,
              "shared memory configuration": LAUNCH_PREFIXES, "device flags": HOST_WAITS, "context flags": HOST_WAITS,
              "pool attribute": POOL_USERS + CONTEXT_SYNC_PREFIXES + STREAM_SYNC_PREFIXES}
# limits that cannot change once a kernel using them was launched (the runtime's cudaDeviceSetLimit)
FIXED_AFTER_LAUNCH = (1, 2)
ACTIVE = ("cudaErrorSetOnActiveProcess", "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE")


@dataclass(frozen=True)
class Setting:
    """One recorded setting call: what it set, where (its scope), to what, by whom."""

    kind: str
    which: int  # the limit, or the pool attribute; 0 for flags and configurations
    scope: int  # the context (limits, configurations, context flags), device (device flags) or pool
    value: int
    event: dict
    owner: tuple[str, str]  # (library or "the program", thread)

    def name(self) -> str:
        """The setting as a report names it."""
        if self.kind == "limit":
            return f"the {LIMITS.get(self.which, f'limit {self.which}')} limit"
        if self.kind == "pool attribute":
            return f"the {POOL_ATTRIBUTES.get(self.which, f'attribute {self.which}')} of pool {self.scope:#x}"
        return f"the {self.kind}"

    def by(self) -> str:
        """``name by library on thread T``."""
        return f"{self.event.get('name', '?')} by {self.owner[0]} on thread {self.owner[1]}"


@dataclass
class Settings:
    """Every setting call in time order, by key (kind, which, scope)."""

    history: dict[tuple, list[Setting]] = field(default_factory=dict)

    def before(self, key: tuple, at: int) -> Setting | None:
        """The setting of this key in force at time ``at`` (the last one made before it)."""
        found = None
        for setting in self.history.get(key, ()):
            if setting.event.get("start", 0) < at:
                found = setting
        return found


def owner_of(s: Stream, e: dict) -> tuple[str, str]:
    """Who made a call: the library (the runtime call around a driver call stands for it), and its thread."""
    outer = s.enclosing_runtime(e) if e.get("domain") == "driver" else None
    library, _ = caller_of(outer or e, s)
    if library == "the CUDA runtime":
        library = (outer or e).get("library") or None
    return (library or "the program", thread_of(e))


def _setter(name: str) -> tuple[str, str] | None:
    for prefix, what in SETTERS.items():
        if name.startswith(prefix):
            return what
    return None


def settings(s: Stream) -> Settings:
    """The settings of this stream (built once, kept on it)."""
    known = getattr(s, "_settings", None)
    if known is not None:
        return known
    out = Settings()
    devices: dict = {}  # tid -> the runtime device its cudaSetDevice chose
    for e in s.named(("cudaSetDevice", *SETTERS)):
        name, args = e.get("name", ""), e.get("args") or {}
        if name.startswith("cudaSetDevice") and not name.startswith("cudaSetDeviceFlags") and "device" in args:
            devices[e.get("tid")] = args["device"]
        what = _setter(name)
        if what is None or not succeeded(e) or what[1] not in args:
            continue
        outer = s.enclosing_runtime(e) if e.get("domain") == "driver" else None
        if outer is not None and _setter(outer.get("name", "")) is not None:
            continue  # the runtime's driver call beneath its own setting call: one setting
        kind, key = what
        value, which, scope = args[key], 0, e.get("context") or 0
        if kind == "limit":
            which = args.get("limit", 0)
        elif kind == "pool attribute":
            which, scope = args.get("attr", 0), args.get("pool", 0)
            value = value & 0xFFFFFFFF if which in INT_POOL_ATTRIBUTES else value
        elif kind == "device flags":
            scope = args.get("device", devices.get(e.get("tid"), 0))
        setting = Setting(kind, which, scope, value, e, owner_of(s, e))
        out.history.setdefault((kind, which, scope), []).append(setting)
    s._settings = out  # type: ignore[attr-defined]
    return out


def _depends(kind: str, scope: int, e: dict) -> bool:
    """Whether a call is one whose behaviour this setting decides (in its context, where it has one)."""
    if not e.get("name", "").startswith(DEPENDENTS[kind]):
        return False
    return kind in ("device flags", "pool attribute") or not scope or e.get("context") == scope


def _dependents(s: Stream, setting: Setting, start: int, end: int | None) -> list[dict]:
    """The calls another owner than the setting's made between two times that depend on it."""
    out = []
    for e in s.calls:
        at = e.get("start", 0)
        if at <= start or (end is not None and at >= end) or e.get("from") == "callback":
            continue
        if _depends(setting.kind, setting.scope, e) and owner_of(s, e) != setting.owner:
            out.append(e)
    return out


def _value(setting: Setting) -> str:
    v = setting.value
    if setting.kind == "limit" or (setting.kind == "pool attribute" and setting.which == 4):
        return f"{v} bytes" if v < 1 << 20 else f"{v / (1 << 20):.0f} MiB ({v} bytes)"
    return f"{v:#x}"


def setting_changed_under(s: Stream) -> list[Hit]:
    """A setting changed by one owner (library, thread) under another that had set it to another value, or
    that relied on it before the change and whose dependent call failed after it."""
    hits = []
    for history in settings(s).history.values():
        for i, new in enumerate(history):
            at = new.event.get("start", 0)
            following = history[i + 1].event.get("start", 0) if i + 1 < len(history) else None
            prev = history[i - 1] if i else None
            after = _dependents(s, new, at, following)
            failing = [e for e in after if failed(e)]
            if prev is not None and prev.owner != new.owner and prev.value != new.value:
                cause = Cause(prev.event, f"{prev.by()} had set {prev.name()} to {_value(prev)}")
                before = f"{prev.by()} had set it to {_value(prev)}"
            else:
                relied = _dependents(s, new, prev.event.get("start", 0) if prev else -1, at)
                if prev is not None and prev.value == new.value or not relied or not failing:
                    continue
                cause = Cause(relied[-1], f"{on(relied[-1])} ({owner_of(s, relied[-1])[0]}) ran under the "
                                          f"previous {new.name()}" + (f" ({_value(prev)})" if prev else ""))
                before = f"{owner_of(s, relied[-1])[0]} relied on its previous value"
            then = (failing or after)[:1]
            later = (f"; after it, {on(then[0])} ({owner_of(s, then[0])[0]}) "
                     + (f"returned {then[0].get('status')}" if failed(then[0]) else "ran under the new value")
                     if then else "")
            hits.append(Hit(new.event, f"{new.by()} set {new.name()} to {_value(new)}, changing it under another: "
                                       f"{before}{later}. A context- or process-wide setting is shared by every "
                                       f"library and thread using the context: set it once, before the others "
                                       f"start, to what all of them need",
                            calls=(cause.event or new.event, new.event),  # the later call stays its own finding
                            related=tuple(("behaved differently after it at", e) for e in then),
                            **cause.hit_fields()))
    return hits


SETTING_CHANGED_UNDER_RULE = Rule(
    "setting-changed-under", "warning", "A context- or process-wide setting changed under another library",
    "Limits (cuCtxSetLimit, cudaDeviceSetLimit: stack size, printf FIFO, malloc heap, persisting L2), device and "
    "context flags, the cache and shared memory configuration and memory pool attributes (the release "
    "threshold) are shared by every library and thread using the context or pool. One library changing what "
    "another set, or relied on, changes how the other's kernels, synchronisations and allocations behave: a "
    "kernel that runs out of stack or heap, a pool that keeps or releases memory, a sync that spins or blocks.",
    NO_CLAIM, setting_changed_under,
    "Follows the settings made while tracing through the calls named, by their kept parameters; settings made "
    "before tracing began, per-function attributes, and CUDA_VISIBLE_DEVICES changed after CUDA started (the "
    "child does not watch os.environ) are not seen. A change under another that only relied on the old value "
    "is reported where a call of the other that depends on it failed after the change.")


def settings_cause(s: Stream, e: dict) -> Cause | None:
    """A failing call's cause where a setting explains it: a call depending on a setting another owner changed
    before it; a limit refused after a kernel was launched; flags refused on an active context."""
    name, at = e.get("name", ""), e.get("start", 0)
    what = _setter(name)
    if what is not None:
        args = e.get("args") or {}
        if str(e.get("status")) in ACTIVE:
            made = next((c for c in s.resources if c.get("name") == "CONTEXT_CREATED" and c.get("start", 0) < at
                         and (not e.get("context") or c.get("context") == e.get("context"))), None)
            if made is not None:
                return Cause(made, f"context {made.get('context') or 0:#x} was already active, created on thread "
                                   f"{thread_of(made)}: its flags were fixed then")
        if what[0] == "limit" and args.get("limit") in FIXED_AFTER_LAUNCH:
            launched = [c for c in s.calls if c.get("name", "").startswith(LAUNCH_PREFIXES) and c.get("start", 0) < at
                        and ok_or_pending(c) and (not e.get("context") or c.get("context") == e.get("context"))]
            if launched:
                return Cause(launched[-1], f"{on(launched[-1])} launched a kernel in the context before: the "
                                           f"{LIMITS[args['limit']]} cannot change after a kernel that uses it "
                                           f"(printf, device malloc) was launched")
        return None
    model = settings(s)
    mine = owner_of(s, e)
    for (kind, which, scope), history in model.history.items():
        if not _depends(kind, scope, e):
            continue
        now = model.before((kind, which, scope), at)
        if now is not None and now.owner != mine and any(h.owner == mine for h in history
                                                          if h.event.get("start", 0) < now.event.get("start", 0)):
            return Cause(now.event, f"{now.by()} changed {now.name()} to {_value(now)} under {mine[0]}")
    return None
