"""A few PyTorch training steps of a small MLP on the GPU (forward, backward,
optimizer step), then one step on a second host thread. Written without ctxlab in
mind; trace it with

    ctxlab trace --format perfetto -o torch.trace.json -- examples/programs/torch_train_step.py
"""

import sys
import threading

import torch


def step(model, optimizer, x, y) -> float:
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return float(loss.item())


def main(steps: int = 5) -> int:
    torch.manual_seed(0)
    device = torch.device("cuda", 0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(256, 64, device=device)
    y = x[:, :1] * 0.5 + 0.1
    losses = [step(model, optimizer, x, y) for _ in range(steps)]
    done = {}
    thread = threading.Thread(target=lambda: done.setdefault("loss", step(model, optimizer, x, y)),
                              name="torch-worker")
    thread.start()
    thread.join()
    torch.cuda.synchronize()
    print(f"torch losses: {' '.join(f'{v:.4f}' for v in losses)}; on torch-worker: {done['loss']:.4f}")
    return 0 if losses[-1] < losses[0] and "loss" in done else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
