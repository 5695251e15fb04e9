"""What a call's name makes it to the state model's replay (a launch, a sync, a context change, a maker or
destroyer of a handle, an allocation, a free, a capture's begin or end): the name families, and each distinct
name's roles worked out once (a program makes few distinct calls many times; the replay's prefix tests would
otherwise run on every record)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ctxlab.audit.events import CONTEXT_CHANGE_PREFIXES, CONTEXT_SYNC_PREFIXES, LAUNCH_PREFIXES

MAKES = (("stream", "cuStreamCreate", "stream"), ("event", "cuEventCreate", "event"),
         ("module", "cuModuleLoad", "module"), ("function", "cuModuleGetFunction", "function"),
         ("function", "cuKernelGetFunction", "function"))
GONES = (("stream", "cuStreamDestroy", "stream"), ("event", "cuEventDestroy", "event"),
         ("module", "cuModuleUnload", "module"))


@dataclass(frozen=True)
class CallRoles:
    """What a call's name makes it to the replay."""

    end_capture: bool
    begin_capture: bool
    context_change: bool
    set_device: bool
    launch: bool
    sync: bool
    alloc: bool
    free: bool
    makes: tuple[tuple[str, str, str], ...]
    gones: tuple[tuple[str, str, str], ...]
    any: bool = False  # any of the above: a call of this name can change what the model holds


_ROLES: dict[str, CallRoles] = {}


def roles(name: str) -> CallRoles:
    """The roles of calls of this name (kept per distinct name)."""
    known = _ROLES.get(name)
    if known is None:
        known = _ROLES[name] = CallRoles(
            end_capture=name.startswith(("cuStreamEndCapture", "cudaStreamEndCapture")),
            begin_capture=name.startswith(("cuStreamBeginCapture", "cudaStreamBeginCapture")),
            context_change=name.startswith(CONTEXT_CHANGE_PREFIXES), set_device=name.startswith("cudaSetDevice"),
            launch=name.startswith(LAUNCH_PREFIXES), sync=name.startswith(CONTEXT_SYNC_PREFIXES),
            alloc=name.startswith(("cuMemAlloc", "cudaMalloc")), free=name.startswith(("cuMemFree", "cudaFree")),
            makes=tuple(m for m in MAKES if name.startswith(m[1])),
            gones=tuple(g for g in GONES if name.startswith(g[1])))
        known = _ROLES[name] = dataclasses.replace(known, any=any(
            getattr(known, f.name) for f in dataclasses.fields(known) if f.name != "any"))
    return known
