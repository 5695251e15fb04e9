"""Clean (two GPUs): one process per GPU started with 'spawn', each binding its GPU first (the DDP pattern).

The launcher starts one worker per GPU with the 'spawn' start method and initialises no CUDA itself.
Each worker calls torch.cuda.set_device(rank) before any other CUDA call, so it has exactly one context,
on its own GPU, and trains a small model there; results come back through a queue (no NCCL needed).

Report: https://github.com/facebookresearch/fairchem/pull/342 -- removes the extra context on GPU 0 in
distributed training by calling torch.cuda.set_device(local_rank) in each process.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/two_gpu/clean_ddp_spawn_per_gpu.py
"""

import multiprocessing as mp

import torch


def train(rank: int, results) -> None:
    torch.cuda.set_device(rank)
    torch.manual_seed(rank)
    model = torch.nn.Linear(32, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(512, 32, device="cuda")
    y = x.sum(dim=1, keepdim=True)
    for _ in range(50):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    results.put((rank, torch.cuda.current_device(), loss.item()))


def main() -> int:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    workers = [ctx.Process(target=train, args=(rank, results), name=f"rank-{rank}") for rank in range(2)]
    for p in workers:
        p.start()
    out = sorted(results.get(timeout=300) for _ in workers)
    for p in workers:
        p.join(60)
    summary = [(rank, dev, round(loss, 4)) for rank, dev, loss in out]
    print(f"(rank, device, loss): {summary}; exit codes {[p.exitcode for p in workers]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
