"""Failing calls that libraries make on purpose and handle: told apart from failures by evidence, never by a
list of status codes.

Two kinds of evidence:

- the call around it succeeded: a driver call the runtime made beneath one of its own calls that returned
  success was answered, and the runtime went on (``CallState.handled_by``);
- the catalogue below: (library, call, status), each entry backed by a clean program of the corpus in which
  it occurs while the program works as intended. ``tests/gpu/test_realworld.py`` keeps it true on the GPU:
  every entry must occur in its program's audit, and no clean program may have a failing call that is
  neither handled nor catalogued.

A failing call that changes a setting (``SETTINGS``) is never a probe, whatever succeeded around it: the program
goes on with a setting it did not get.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxlab.audit.model.state import CallState


@dataclass(frozen=True)
class Probe:
    """A failing call a library makes on purpose, with the clean program where it was seen."""

    library: str  # as ctxlab.audit.model.state.caller_of names it
    call: str  # the function's name (a prefix: cuCtxGetDevice covers cuCtxGetDevice_v2)
    status: str
    program: str  # examples/realworld/clean_*.py where it occurs
    why: str


PROBES: tuple[Probe, ...] = ()


def probe_of(state: CallState, catalogue: tuple[Probe, ...] = PROBES) -> Probe | None:
    """The catalogue's entry for a failing call, if its library, function and status are catalogued."""
    name, status = state.event.get("name", ""), state.event.get("status")
    for probe in catalogue:
        if probe.library == state.library and name.startswith(probe.call) and probe.status == status:
            return probe
    return None


# Calls that change a setting of the context, the device or a pool. When one fails the program goes on with a
# setting it did not get (a stack or heap limit, device flags, a cache or shared memory configuration, a
# function's attribute, a pool's release threshold), whatever a call around it returned: never a probe.
SETTINGS = ("cudaDeviceSetLimit", "cuCtxSetLimit", "cudaSetDeviceFlags", "cuDevicePrimaryCtxSetFlags",
            "cuCtxSetFlags", "cudaDeviceSetCacheConfig", "cuCtxSetCacheConfig", "cudaFuncSetAttribute",
            "cuFuncSetAttribute", "cudaFuncSetCacheConfig", "cuFuncSetCacheConfig", "cudaFuncSetSharedMemConfig",
            "cuFuncSetSharedMemConfig", "cudaDeviceSetSharedMemConfig", "cuCtxSetSharedMemConfig",
            "cudaMemPoolSetAttribute", "cuMemPoolSetAttribute", "cudaDeviceSetMemPool", "cuDeviceSetMemPool",
            "cuKernelSetAttribute", "cuKernelSetCacheConfig")


def is_setting(event: dict) -> bool:
    """A call that changes a setting (``SETTINGS``)."""
    return str(event.get("name", "")).startswith(SETTINGS)


def is_probe(state: CallState) -> bool:
    """Whether a failing call was a library's probe: handled beneath a successful call, or catalogued; a failing
    settings call never is (the program goes on without the setting)."""
    if is_setting(state.event):
        return False
    return state.handled_by is not None or probe_of(state) is not None
