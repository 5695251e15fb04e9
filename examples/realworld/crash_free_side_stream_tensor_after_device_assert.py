"""A validation step whose side-stream label upload outlives a device-side assert, and aborts when freed.

The step uploads each batch's labels on a copy stream (pinned memory, non_blocking=True) and, as PyTorch
asks for memory made on one stream and used on another, calls record_stream for the compute stream. The
second batch holds one label equal to the number of classes (a detector's "background" index counted from
zero): the nll_loss kernel inside cross_entropy fails its device-side bounds assert, and the context is
poisoned (cudaErrorAssert, sticky). The loss read raises; the step catches it and prints it, as a
validation loop that "skips the bad batch" does. Then the labels tensor goes out of scope. Its block was
used on another stream, so the caching allocator records an event on that stream as it frees it
(insert_events): cudaEventRecord returns the sticky error, C10_CUDA_CHECK throws inside the tensor's
destructor, and the C++ runtime calls std::terminate ("terminate called after throwing an instance of
'c10::AcceleratorError'"): SIGABRT.

Report: https://github.com/open-mmlab/mmdetection/issues/3742 -- after "CUDA error: device-side assert
triggered" (a class index out of range), the job dies with "terminate called after throwing an instance of
'c10::Error'", raised from insert_events in CUDACachingAllocator.cpp under c10::TensorImpl::release_resources.

Expected findings, all on thread MainThread: sticky-error at the line marked HAZARD sticky-error in
validate() (the cross_entropy whose kernel asserts; the loss read where the error first surfaces is the
line marked SYMPTOM), and program-crashed at the line marked HAZARD program-crashed (the del of the labels
tensor, where the process aborts). Ends by SIGABRT; nothing after that line runs.

    ctxlab audit -- examples/realworld/crash_free_side_stream_tensor_after_device_assert.py
"""

import torch
import torch.nn.functional as F

NUM_CLASSES = 80
BATCH = 512


def validate(step: int, copy_stream: torch.cuda.Stream, logits: torch.Tensor, labels_host: torch.Tensor) -> None:
    compute = torch.cuda.current_stream()
    with torch.cuda.stream(copy_stream):
        labels = labels_host.pin_memory().to("cuda", non_blocking=True)
    compute.wait_stream(copy_stream)
    labels.record_stream(compute)  # made on the copy stream, read on the compute stream
    loss = F.cross_entropy(logits, labels)  # HAZARD: sticky-error
    try:
        print(f"step {step}: validation loss {loss.item():.4f}", flush=True)  # SYMPTOM: sticky-error
    except RuntimeError as exc:
        print(f"step {step}: skipping the batch: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
    del loss
    print(f"step {step}: releasing the batch's labels", flush=True)
    del labels  # HAZARD: program-crashed


def main() -> int:
    torch.manual_seed(0)
    copy_stream = torch.cuda.Stream()
    logits = torch.randn(BATCH, NUM_CLASSES, device="cuda")
    good = torch.randint(0, NUM_CLASSES, (BATCH,))
    bad = good.clone()
    bad[17] = NUM_CLASSES  # the background label, one past the last class
    validate(0, copy_stream, logits, good)
    validate(1, copy_stream, logits, bad)
    print("validation finished (not expected: the free above aborts the process)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
