"""A data-augmentation worker started with multiprocessing's 'fork' after the parent initialised CUDA.

The trainer moves its model to the GPU, then starts an augmentation worker process with the 'fork'
start method (the Linux default before Python 3.14). The worker moves its batch to the GPU: CUDA cannot
be used in a child forked after initialisation, and PyTorch refuses ("Cannot re-initialize CUDA in
forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method"). The worker
catches the error and sends it back.

Report: https://github.com/pytorch/pytorch/issues/40403 -- "Cannot re-initialize CUDA in forked
subprocess" from DataLoader workers and multiprocessing; the answer: use 'spawn' (or keep CUDA out of
the parent until the workers are started).

Expected finding: fork-after-init in the child process (named "child <pid>" by the audit; forked by
MainThread), at the line marked HAZARD in augment() (the child's first CUDA call).

    ctxlab audit -- examples/realworld/fork_torch_worker_after_cuda_init.py
"""

import multiprocessing as mp

import torch


def augment(batch_size: int, results) -> None:
    try:
        batch = torch.randn(batch_size, 3, 32, 32).cuda()  # HAZARD: fork-after-init
        results.put(("ok", float(batch.flip(-1).mean())))
    except Exception as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def main() -> int:
    model = torch.nn.Conv2d(3, 8, 3).cuda()  # CUDA is initialised in the parent from here on
    print(f"model on {next(model.parameters()).device}", flush=True)
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    worker = ctx.Process(target=augment, args=(16, results), name="augment-0")
    worker.start()
    status, detail = results.get(timeout=120)
    worker.join(60)
    print(f"augment-0 (exit {worker.exitcode}): {status}: {detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
