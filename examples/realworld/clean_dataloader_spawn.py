"""Clean: DataLoader-style worker processes started with multiprocessing's 'spawn' after CUDA is initialised.

The trainer puts its model on the GPU first, then starts two loader processes with the 'spawn' start
method: each is a fresh interpreter (no CUDA state inherited), decodes its shard on the CPU and sends it
back; the parent moves the batches to the GPU.

Report: https://github.com/pytorch/pytorch/issues/40403 -- "Cannot re-initialize CUDA in forked
subprocess"; the resolution is the 'spawn' start method for processes started after CUDA is in use.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_dataloader_spawn.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import multiprocessing as mp

import numpy as np
import torch


def load_shard(shard: int, batches) -> None:
    rng = np.random.default_rng(shard)
    batches.put((shard, rng.standard_normal((256, 64)).astype(np.float32)))


def main() -> int:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 8).cuda()  # CUDA is initialised before the loaders start
    ctx = mp.get_context("spawn")
    batches = ctx.Queue()
    loaders = [ctx.Process(target=load_shard, args=(i, batches), name=f"loader-{i}") for i in range(2)]
    for p in loaders:
        p.start()
    received = sorted(batches.get(timeout=120) for _ in loaders)
    for p in loaders:
        p.join(60)
    with torch.no_grad():
        outs = [model(torch.from_numpy(batch).cuda()) for _, batch in received]
    print(f"shards {[s for s, _ in received]} -> outputs {[tuple(o.shape) for o in outs]}, "
          f"loader exit codes {[p.exitcode for p in loaders]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
