"""interop's exchange scenarios: an array handed from one library to another through DLPack or the CUDA Array
Interface, while the producer's stream may still be writing it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from ctxlab.claim import (
    hexed,
)
from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.outcome import checked, status_name
from ctxlab.labs.common import cuda_recorder, scenario_output, skipped_output
from ctxlab.labs.interop import libs
from ctxlab.labs.interop.claims import CAI_CONSUMERS, ROUNDS, UNORDERED, K, N, _exchange_name
from ctxlab.labs.interop.libs import Missing, init_library, owner_context, primary_of, version_of


def _produce(lib: str, device: int) -> tuple[Any, Any, Callable[[], Any]]:
    """An int32 array of N elements, each K, written on the producer's own non-default stream (not synchronized).

    Returns (array, stream, enter) where ``enter()`` is a context manager making that stream the library's current
    one (Numba carries its stream in __cuda_array_interface__ instead).
    """

    if lib == "cupy":
        import cupy

        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            x = cupy.zeros(N, dtype=cupy.int32)
            for _ in range(K):
                x += 1
        return x, s, lambda: s
    if lib == "torch":
        import torch

        ts = torch.cuda.Stream(device=device)
        with torch.cuda.stream(ts):
            t = torch.zeros(N, dtype=torch.int32, device=f"cuda:{device}")
            for _ in range(K):
                t += 1
        return t, ts, lambda: torch.cuda.stream(ts)
    import numpy
    from numba import cuda

    ns = cuda.stream()
    host = numpy.full(N, K, dtype=numpy.int32)
    d = cuda.to_device(host, stream=ns)  # an async copy on Numba's stream, exported in the interface
    return d, ns, contextlib.nullcontext


def _pointer(lib: str, array: Any) -> int:
    if lib == "cupy":
        return array.data.ptr
    if lib == "torch":
        return array.data_ptr()
    if lib == "jax":
        return array.unsafe_buffer_pointer()
    return array.__cuda_array_interface__["data"][0]


def _consume(lib: str, protocol: str, array: Any, device: int) -> tuple[Any, Callable[[], int]]:
    """The consumer's view of ``array`` and a function reading its sum in the consumer's own library."""
    if lib == "cupy":
        import cupy

        y = cupy.from_dlpack(array) if protocol == "dlpack" else cupy.asarray(array)
        return y, lambda: int(y.sum())
    if lib == "torch":
        import torch

        t = torch.from_dlpack(array) if protocol == "dlpack" else torch.as_tensor(array, device=f"cuda:{device}")
        return t, lambda: int(t.sum().item())
    if lib == "jax":
        import jax.dlpack
        import jax.numpy as jnp

        z = jax.dlpack.from_dlpack(array)
        return z, lambda: int(jnp.sum(z))
    from numba import cuda

    d = cuda.as_cuda_array(array)
    return d, lambda: int(d.copy_to_host().sum(dtype="int64"))


def _handover(consumer: str, protocol: str, produced: tuple, device: int, ordered: bool = True) -> dict:
    """The consumer's side of one exchange on the calling thread: import (inside the producer's stream, or after
    leaving it), then read the sum in the consumer's library."""
    producer, x, enter = produced
    interface = {}
    if protocol == "cai":  # what the producer's interface says, read where the consumer reads it
        with enter() if ordered else _nothing():
            cai = x.__cuda_array_interface__
        interface = {"cai_version": cai.get("version"), "cai_stream": cai.get("stream")}
    try:
        if ordered:
            with enter():
                y, read = _consume(consumer, protocol, x, device)
        else:
            y, read = _consume(consumer, protocol, x, device)
    except Exception as exc:
        return {"read": status_name(exc)[:300], "pointer_context": None, "producer_pointer": _pointer(producer, x),
                "consumer_pointer": None}
    got = checked(read, N * K)
    px, py = _pointer(producer, x), _pointer(consumer, y)
    return {"read": got, "producer_pointer": px, "consumer_pointer": py,
            "pointer_context": owner_context(py), "keep": (x, y), **interface}


def _nothing() -> Any:
    return contextlib.nullcontext()


def exchange(device: int, producer: str, consumer: str, protocol: str) -> dict:
    """The producer writes on its own stream on the main thread; the consumer imports by DLPack or CAI and reads,
    on the main thread and on a worker thread that received the context by push."""
    scenario = _exchange_name(producer, consumer)
    try:
        for lib in (producer, consumer):
            libs.require(lib)
        init_driver()
        rec = cuda_recorder(scenario)
        init_library(producer, device)
        init_library(consumer, device)
    except Missing as why:
        return skipped_output(scenario, why.skip)
    primary, _ = primary_of(device)
    how = (f"{producer} -> {'from_dlpack' if protocol == 'dlpack' else CAI_CONSUMERS[consumer]} in {consumer}, "
           f"handed over inside the producer's stream")
    common = {"producer": producer, "consumer": consumer, "protocol": protocol, "primary": primary, "how": how,
              "versions": {producer: version_of(producer), consumer: version_of(consumer)}}
    kept: list = []

    def produce() -> tuple:
        x, stream, enter = _produce(producer, device)
        kept.append((x, stream))
        return producer, x, enter

    for r in range(ROUNDS):
        v = _handover(consumer, protocol, produce(), device)
        kept.append(v.pop("keep", None))
        rec.add("main", "exchange", {**common, **v, "thread": "main", "worker_current_after": None}, round=r)
    ctx = drv.current().handle or primary

    def work(r: int, produced: tuple) -> None:
        drv.push(ctx)
        v = _handover(consumer, protocol, produced, device)
        kept.append(v.pop("keep", None))
        after = drv.current()
        rec.add("worker", "exchange", {**common, **v, "thread": "worker", "pushed": ctx,
                                       "worker_current_after": "the pushed context" if after.handle == ctx
                                       else hexed(after.handle)}, round=r)
        drv.pop()

    for r in range(ROUNDS):
        worker = threading.Thread(target=work, args=(r, produce()), name=f"worker-{r + 1}")
        worker.start()
        worker.join(120)
    if scenario in UNORDERED:
        for r in range(ROUNDS):
            v = _handover(consumer, protocol, produce(), device, ordered=False)
            kept.append(v.pop("keep", None))
            rec.add("main", "exchange unordered",
                    {**common, **v, "how": f"{producer} -> {consumer} handed over after leaving the producer's "
                                           "stream"}, round=r)
    return scenario_output(rec)


# ---------------------------------------------------------------- processes
