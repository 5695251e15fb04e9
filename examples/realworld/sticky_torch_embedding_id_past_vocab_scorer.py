"""A scoring worker whose embedding lookup gets a token id past the vocabulary: a device-side assert.

A text-scoring service runs its model on a worker thread that takes requests from a queue. The
tokenizer was updated and now emits ids up to 32,003, but the embedding table still has 32,000 rows.
On the GPU the lookup (F.embedding, an index_select) does not check its indices on the host: its kernel
asserts, and the worker learns of it only when it copies the looked-up vectors to the host for scoring:
"CUDA error: device-side assert triggered" (cudaErrorAssert, 710). The context is unusable from then on;
the worker reports the later requests as failed without touching the GPU again.

Report: https://github.com/pytorch/pytorch/issues/29966 -- an nn.Embedding looked up on the GPU with an
index outside its table gives "RuntimeError: CUDA error: device-side assert triggered" (the kernel's
"Assertion `srcIndex < srcSelectDimSize` failed" in indexSelect).

Expected finding: sticky-error on thread scorer-0, at the line marked HAZARD in Scorer.score() (the
embedding lookup whose kernel asserts); the error first surfaces at the line marked SYMPTOM (the copy to
the host, with no launch between the two). The worker catches the RuntimeError and reports it.

    ctxlab audit -- examples/realworld/sticky_torch_embedding_id_past_vocab_scorer.py
"""

import queue
import threading

import torch
import torch.nn.functional as F

VOCAB, DIM = 32000, 64
REQUESTS = [[17, 4051, 230, 9], [5, 31999, 32003, 7], [88, 12, 640]]  # the second has an id past the table


class Scorer:
    def __init__(self) -> None:
        gen = torch.Generator().manual_seed(0)
        self.table = torch.randn(VOCAB, DIM, generator=gen).cuda()
        self.head = torch.randn(DIM, generator=gen)  # scored on the host

    def score(self, token_ids: list) -> float:
        ids = torch.tensor(token_ids, dtype=torch.long, device="cuda")
        vectors = F.embedding(ids, self.table)  # HAZARD: sticky-error
        host = vectors.cpu()  # SYMPTOM: sticky-error
        return float((host.mean(0) * self.head).sum())


def serve(scorer: Scorer, requests: queue.Queue, results: list) -> None:
    broken = None
    while True:
        item = requests.get()
        if item is None:
            return
        number, token_ids = item
        if broken is not None:
            results.append((number, f"refused: the GPU context failed earlier ({broken})"))
            continue
        try:
            results.append((number, f"score {scorer.score(token_ids):.4f}"))
        except RuntimeError as exc:  # torch.AcceleratorError is a RuntimeError
            broken = str(exc).strip().splitlines()[0]
            results.append((number, f"failed: {broken}"))


def main() -> int:
    scorer = Scorer()
    requests: queue.Queue = queue.Queue()
    results: list = []
    worker = threading.Thread(target=serve, args=(scorer, requests, results), name="scorer-0")
    worker.start()
    for number, token_ids in enumerate(REQUESTS):
        requests.put((number, token_ids))
    requests.put(None)
    worker.join()
    for number, status in results:
        print(f"request {number}: {status}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
