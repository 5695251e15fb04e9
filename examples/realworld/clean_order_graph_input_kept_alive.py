"""Clean: a CUDA graph replayed with the input array it was captured with kept alive and refilled in place.

The same captured normalisation as order_graph_replay_after_input_freed.py, done right: the stage keeps
the staging array for as long as it keeps the graph, and puts each new input into that array (a fill on
the same stream) before it launches the graph, so the replay reads the new input and the other stage's
array gets a block of its own.

Report: https://github.com/microsoft/onnxruntime/pull/32121 -- the fix keeps the captured buffer alive
for as long as the captured graph can be replayed, instead of handing it back to the allocator.

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_order_graph_input_kept_alive.py
"""

import cupy

N = 4 << 20  # 4 Mi float32 values: 16 MiB


def main() -> int:
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        staging = cupy.full(N, 3, dtype=cupy.float32)
        out = cupy.empty(N, dtype=cupy.float32)
        cupy.multiply(staging, 2, out=out)  # compiles the kernel before the capture
        stream.synchronize()
        stream.begin_capture()
        cupy.multiply(staging, 2, out=out)
        graph = stream.end_capture()
        other = cupy.full(N, 5, dtype=cupy.float32)  # another stage's array: a block of its own
        staging.fill(4)  # the new input, in the captured array, on the graph's stream
        graph.launch(stream)
        stream.synchronize()
    got = out.get()
    print(f"replayed output 8.0 (twice the new input 4): {int((got == 8.0).sum())} of {N} (expected all); "
          f"10.0 (twice the other array's 5): {int((got == 10.0).sum())}; other array {other.shape}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
