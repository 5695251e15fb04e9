"""A parameter sweep that forks one simulation process per job after Numba initialised CUDA in the parent.

The sweep driver checks the GPU with Numba (which initialises the driver and makes the primary context
current), then runs each job in a process started with multiprocessing's 'fork' start method. The job
copies its initial field to the GPU: Numba notices the process was forked after the driver was
initialised and refuses with CudaDriverError("CUDA initialized before forking"). The job catches the
error and sends it back.

Report: https://github.com/glotzerlab/signac-flow/issues/115 -- running Numba-based CUDA jobs with
--parallel (forked workers) fails with numba.cuda.cudadrv.error.CudaDriverError: CUDA initialized before
forking.

Expected finding: fork-after-init in the child process (named "child <pid>" by the audit; forked by
MainThread), at the line marked HAZARD in simulate() (the child's first CUDA call).

    ctxlab audit -- examples/realworld/fork_numba_after_init.py
"""

import multiprocessing as mp

import numpy as np
from numba import cuda


def simulate(job: int, results) -> None:
    try:
        field = cuda.to_device(np.full(1 << 16, job, dtype=np.float32))  # HAZARD: fork-after-init
        results.put(("ok", float(field.copy_to_host().sum())))
    except Exception as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def main() -> int:
    gpu = cuda.current_context().device  # initialises the driver in the parent
    print(f"sweep on {gpu.name.decode() if isinstance(gpu.name, bytes) else gpu.name}", flush=True)
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    job = ctx.Process(target=simulate, args=(1, results), name="job-1")
    job.start()
    status, detail = results.get(timeout=120)
    job.join(60)
    print(f"job-1 (exit {job.exitcode}): {status}: {detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
