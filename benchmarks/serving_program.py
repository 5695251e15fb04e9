"""A PyTorch inference server in miniature: worker threads that each call ``torch.cuda.set_device`` first,
make their own stream and weight tensor, then serve requests from a queue (the program of the tracer's
deadlock report, and the one its overhead is measured on).

    python benchmarks/serving_program.py [WORKERS] [REQUESTS]

Prints one JSON line: the requests served and how long serving took.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time

import torch


def main(argv: list[str]) -> int:
    workers = int(argv[0]) if argv else 4
    requests = int(argv[1]) if len(argv) > 1 else 400
    devices = torch.cuda.device_count()
    inbox: queue.Queue = queue.Queue()
    served: list[float] = []
    lock = threading.Lock()
    ready = threading.Barrier(workers + 1)

    def worker(index: int) -> None:
        torch.cuda.set_device(index % devices)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            weight = torch.randn(1024, 1024, device="cuda")
        stream.synchronize()
        ready.wait()
        while True:
            item = inbox.get()
            if item is None:
                return
            with torch.cuda.stream(stream):
                batch = torch.full((64, 1024), float(item), device="cuda")
                out = torch.relu(batch @ weight).sum()
            value = float(out)  # synchronises this worker's stream
            with lock:
                served.append(value)

    threads = [threading.Thread(target=worker, args=(i,), name=f"server-{i}") for i in range(workers)]
    for thread in threads:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    for i in range(requests):
        inbox.put(i % 7)
    for _ in threads:
        inbox.put(None)
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    print(json.dumps({"workers": workers, "requests": requests, "served": len(served),
                      "serving_seconds": round(seconds, 4)}))
    return 0 if len(served) == requests else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
