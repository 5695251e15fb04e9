"""Clean: inference-server worker threads that each call torch.cuda.set_device first and use their own stream.

The server loads the model once on GPU 0. Each worker thread binds the device on its own thread before
any other CUDA call (torch.cuda.set_device(0) makes the primary context current there), runs its
requests on a stream of its own and synchronises that stream before handing results back.

Report: https://github.com/arbor-sim/arbor/issues/655 -- cudaSetDevice binds a device to the calling
thread only, so it must be called from every thread that makes CUDA calls; the fix sets the device at the
start of each worker's work.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_inference_workers_set_device.py
Info listed after the wave-4 audit counted it: several-runtime-copies (infer-)."""

import threading

import torch


def worker(model: torch.nn.Module, seed: int, out: dict) -> None:
    torch.cuda.set_device(0)
    stream = torch.cuda.Stream()
    gen = torch.Generator().manual_seed(seed)
    answers = []
    with torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(8):
            x = torch.randn(32, 64, generator=gen).to("cuda", non_blocking=True)
            answers.append(model(x).argmax(dim=1))
    stream.synchronize()
    out[seed] = sum(int(a.sum()) for a in answers)


def main() -> int:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).cuda().eval()
    torch.cuda.synchronize()  # the weights are written before any worker stream reads them
    out: dict = {}
    workers = [threading.Thread(target=worker, args=(model, i, out), name=f"infer-{i}") for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(f"served {len(out)} workers x 8 requests: {dict(sorted(out.items()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
