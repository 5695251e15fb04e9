"""interop's scenarios under another context (area 4), each in a fresh interpreter: a library used while a
cuCtxCreate or a green context is current, and PyTorch's own green contexts."""

from __future__ import annotations

import importlib
from typing import Any

from ctxlab.cuda import driver as drv
from ctxlab.cuda import green
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.green import GreenUnavailable
from ctxlab.cuda.kernels import ProbeModule
from ctxlab.cuda.outcome import attempt, status_name
from ctxlab.lab import Isolation, Scenario
from ctxlab.labs.common import cuda_recorder, scenario_output, skipped_output
from ctxlab.labs.interop import libs
from ctxlab.labs.interop.libs import (
    Made,
    Missing,
    _current_id,
    as_int,
    cuda_core_device,
    make,
    owner_of,
    primary_of,
    version_of,
)
from ctxlab.labs.interop.names import ENV, LIBRARIES
from ctxlab.labs.interop.under_claims import CONTEXT_NAMES, KINDS, SUM, N, which
from ctxlab.labs.migrate.green import SMID_BLOCKS, distinct_sms
from ctxlab.records import skips


def _enter(kind: str, device: int) -> tuple[int, Any]:
    """Make the created or green context current on this thread: (its handle, what keeps it)."""
    if kind == "created":
        return drv.create_context(device), None
    made, why = green.make_or_reason(device)
    if made is None:
        raise green.GreenUnavailable(why)
    drv.push(made.handle)
    return made.handle, made


def under(device: int, kind: str, lib: str) -> dict:
    """``lib``'s first allocation and kernel with a created or green context current, in a fresh interpreter."""
    scenario = f"under-{kind}-{lib}"
    try:
        libs.require(lib)
        init_driver()
        handle, keep_context = _enter(kind, device)
    except Missing as why:
        return skipped_output(scenario, why.skip)
    except GreenUnavailable as why:
        return skipped_output(scenario, skips.unsupported(str(why)))
    rec = cuda_recorder(scenario)
    context_id = drv.context_id(handle)
    first_call = None
    if lib == "cuda-core":  # its documented first step is set_current(): what does allocate do before it?

        dev = cuda_core_device()(device)
        first_call = attempt(lambda: as_int(dev.allocate(64, stream=dev.default_stream).handle) and "allocated")
    before = _current_id()
    try:
        made: Made | None = make(lib, device)
        alloc = "ok"
    except Missing as why:
        return skipped_output(scenario, why.skip)
    except Exception as exc:  # the library refused: its error, by name, is the outcome
        made, alloc = None, status_name(exc)[:300]
    after_alloc = _current_id()
    kernel = made.kernel() if made else "not run (no allocation)"
    after_kernel = _current_id()
    primary, primary_id = primary_of(device)
    ids = {CONTEXT_NAMES[kind]: context_id, "the primary context": primary_id}
    rec.add("under", "under context",
            {"library": lib, "version": version_of(lib), "kind": kind, "context": handle, "context_id": context_id,
             "primary": primary, "primary_id": primary_id, "call": made.call if made else "-", "alloc": alloc,
             "pointer": made.pointer if made else None, "before_is": which(before, ids),
             "owner_is": owner_of(made.pointer, ids) if made else "none (no allocation)",
             "after_alloc_id": after_alloc, "kernel": kernel, "after_kernel_is": which(after_kernel, ids),
             "first_call": first_call, "green": keep_context.info() if keep_context else None})
    return scenario_output(rec)


# ---------------------------------------------------------------- torch.cuda.green_contexts

def _torch_green(torch: Any, sms: int, device: int) -> tuple[Any, str]:
    """PyTorch's green context, by whichever constructor this PyTorch has (create() up to 2.10, the class later)."""
    from torch.cuda import green_contexts

    cls = green_contexts.GreenContext
    if hasattr(cls, "create"):
        return cls.create(sms, device), f"GreenContext.create({sms}, {device})"
    return cls(num_sms=sms, device_id=device), f"GreenContext(num_sms={sms}, device_id={device})"


def torch_green(device: int) -> dict:
    """torch.cuda.green_contexts: the SMs a kernel on its stream uses, and the context owning a tensor made there."""
    scenario = "torch-green-contexts"
    try:
        torch = libs.require("torch")
    except Missing as why:
        return skipped_output(scenario, {**why.skip, "why": f"torch.cuda.green_contexts is not available: {why}"})
    try:
        importlib.import_module("torch.cuda.green_contexts")
    except ImportError as why:  # this PyTorch has none: its version lacks them
        return skipped_output(scenario, skips.unsupported(f"torch.cuda.green_contexts is not available: {why}"))
    init_driver()
    rec = cuda_recorder(scenario)
    torch.cuda.set_device(device)
    torch.zeros(1, device=f"cuda:{device}")  # the primary context first, as PyTorch's green context expects
    primary, primary_id = primary_of(device)
    sms = 16
    try:
        gc, how = _torch_green(torch, sms, device)
    except Exception as exc:
        return skipped_output(scenario, skips.unsupported(f"PyTorch's green context could not be made here: "
                                                          f"{status_name(exc)[:300]}"))
    if hasattr(gc, "Stream"):  # its documented way: work on a stream of the green context
        stream = gc.Stream()
        handle, green_ctx = int(stream.cuda_stream), drv.stream_context(int(stream.cuda_stream))
        how += "; work on GreenContext.Stream() under torch.cuda.stream"
        with torch.cuda.stream(stream):
            t = torch.arange(1, N + 1, dtype=torch.int64, device=f"cuda:{device}")
            total = int(t.sum().item())
        current = _current_id()
    else:  # older PyTorch: set_context() makes it current, pop_context() restores the previous context
        gc.set_context()
        green_ctx = drv.current().handle
        handle = drv.stream_create()
        how += "; work between set_context() and pop_context()"
        t = torch.arange(1, N + 1, dtype=torch.int64, device=f"cuda:{device}")
        total = int(t.sum().item())
        current = _current_id()
        gc.pop_context()
    green_id = drv.context_id(green_ctx)
    # The primary first: a green context that turned out to be the primary context is named as such.
    ids = {"the primary context": primary_id, "PyTorch's green context": green_id}
    drv.push(green_ctx)  # the probe module must live in the stream's context
    try:
        smids = distinct_sms(ProbeModule.load(), handle, SMID_BLOCKS)
        measured = f"{len(smids)} distinct SMs"
    except Exception as exc:
        measured = status_name(exc)[:300]
    finally:
        drv.pop()
    partition = getattr(getattr(gc, "sm_partition", None), "sm_count", None)
    rec.add("green", "torch green context",
            {"version": version_of("torch"), "how": how, "asked_sms": sms, "reported_sms": partition,
             "stream_context_is": which(green_id, ids), "kernel_sms": measured,
             "tensor_owner_is": owner_of(t.data_ptr(), ids), "sum": "correct" if total == SUM else
             f"silent-wrong-result (got {total}, expected {SUM})", "current_after_is": which(current, ids),
             "primary": primary})
    return scenario_output(rec)


def area_scenarios(device: int) -> list[Scenario]:
    """One fresh interpreter per context kind and library, and PyTorch's own green context."""
    out = [Scenario(f"under-{kind}-{lib}", under, (device, kind, lib), isolation=Isolation.FRESH, env=ENV)
           for kind in KINDS for lib in LIBRARIES]
    out.append(Scenario("torch-green-contexts", torch_green, (device,), isolation=Isolation.FRESH, env=ENV))
    return out
