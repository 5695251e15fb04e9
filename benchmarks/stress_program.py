"""Threads that initialise CUDA at the same moment: the program the tracer's stress runs trace and audit.

    python benchmarks/stress_program.py LIBRARY THREADS [--tracer-after-threads trace|audit]

LIBRARY: torch (``torch.cuda.set_device`` then a stream and a tensor, as an inference server's workers do),
cupy (``cupy.cuda.runtime.setDevice`` and a small reduction), runtime (cuda.bindings' ``cudaSetDevice`` and
``cudaFree(0)``), cuda_core (``Device(0).set_current()`` and a stream), jax (``jax.device_put`` and a sum),
or mix (the threads take those in turn). Every thread waits at one barrier, then makes its first calls.

``--tracer-after-threads``: the threads are started first and wait; then this program starts ctxlab's tracer
itself (as ``trace`` or as ``audit`` does), releases them, and stops it: threads started before the tracer.

With ``CTXLAB_STRESS_DUMP=SECONDS`` every thread's Python stack is written to standard error after that long
(faulthandler), so that a hang shows where each thread was. Prints one JSON line: what ran and how long.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
import time

LIBRARIES = ("torch", "cupy", "runtime", "cuda_core", "jax")


def torch_first_calls(index: int) -> float:
    import torch

    torch.cuda.set_device(0)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        weight = torch.full((256, 256), float(index + 1), device="cuda")
        value = float((weight @ weight).sum())
    stream.synchronize()
    return value


def cupy_first_calls(index: int) -> float:
    import cupy

    cupy.cuda.runtime.setDevice(0)
    return float(cupy.arange(1000 + index).sum())


def runtime_first_calls(index: int) -> float:
    from cuda.bindings import runtime

    (err,) = runtime.cudaSetDevice(0)
    assert int(err) == 0, err
    (err,) = runtime.cudaFree(0)
    assert int(err) == 0, err
    return float(index)


def cuda_core_first_calls(index: int) -> float:
    from cuda.core import Device

    device = Device(0)
    device.set_current()
    stream = device.create_stream()
    stream.sync()
    stream.close()
    return float(index)


def jax_first_calls(index: int) -> float:
    import jax
    import jax.numpy as jnp

    return float(jnp.sum(jax.device_put(jnp.arange(100 + index))))


FIRST_CALLS = {"torch": torch_first_calls, "cupy": cupy_first_calls, "runtime": runtime_first_calls,
               "cuda_core": cuda_core_first_calls, "jax": jax_first_calls}


def preimport(library: str) -> None:
    """Import the libraries first (imports take the import lock; the race under test is CUDA's)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    for name in LIBRARIES if library == "mix" else (library,):
        {"torch": lambda: __import__("torch"), "cupy": lambda: __import__("cupy"),
         "runtime": lambda: __import__("cuda.bindings.runtime"), "cuda_core": lambda: __import__("cuda.core"),
         "jax": lambda: __import__("jax.numpy")}[name]()


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in (*LIBRARIES, "mix"):
        print(__doc__, file=sys.stderr)
        return 2
    library, count = argv[0], int(argv[1])
    tracer_mode = argv[3] if len(argv) > 3 and argv[2] == "--tracer-after-threads" else None
    dump = os.environ.get("CTXLAB_STRESS_DUMP")
    if dump:
        faulthandler.dump_traceback_later(float(dump), exit=False)
    preimport(library)
    barrier = threading.Barrier(count + 1)
    results: dict[int, float] = {}
    errors: list[str] = []

    def work(index: int) -> None:
        name = LIBRARIES[index % len(LIBRARIES)] if library == "mix" else library
        barrier.wait()
        try:
            results[index] = FIRST_CALLS[name](index)
        except Exception as exc:  # reported in the JSON line: the run is judged, not hidden
            errors.append(f"{name} thread {index}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i,), name=f"{library}-worker-{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    tracer = None
    if tracer_mode is not None:
        from ctxlab.audit.child.observe import tracer_options
        from ctxlab.audit.model.hooks import AuditHooks
        from ctxlab.trace import Tracer

        options = tracer_options(AuditHooks()) if tracer_mode == "audit" else {}
        tracer = Tracer(**options).__enter__()
    start = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    report = {"library": library, "threads": count, "finished": len(results), "errors": errors,
              "seconds": round(seconds, 4)}
    if tracer is not None:
        tracer.close()
        from ctxlab.audit import judge

        report["tracer_after_threads"] = tracer_mode
        report["events"] = len(tracer.events)
        report["named_threads"] = sorted({e["thread"] for e in tracer.events if "worker" in str(e["thread"])})
        if tracer_mode == "audit":
            report["findings"] = [f.rule for f in judge(tracer.events)]
        report["tracer_stats"] = {k: v for k, v in tracer.stats.items() if isinstance(v, int)}
    faulthandler.cancel_dump_traceback_later()
    print(json.dumps(report))
    return 0 if not errors and len(results) == count else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
