"""A CUDA graph replayed after the input array it was captured with was dropped and its pool block recycled.

A preprocessing stage captures its normalisation once into a CUDA graph on a non-blocking stream (CuPy's
stream capture), reading a staging array and writing the output. After capture the stage drops the
staging array as if the graph owned a copy of it: the block goes back to CuPy's memory pool, the next
array of the same size (another stage's, filled with 5) gets it, and every replay then reads that array
through the pointer the graph's kernel node was captured with. No call fails; the program prints the
output the replay made and the one expected.

Report: https://github.com/microsoft/onnxruntime/pull/32121 -- a buffer handed back to the allocator right
after it was used under stream capture: the captured node "records the address: every replay re-reads
whatever that block holds at the time", and once another run takes the block the replay reads its bytes.

Expected finding: graph-replays-freed on thread MainThread, at the line marked HAZARD in main() (the
graph's launch); its cause is the free of the staging array (the del, CuPy's pool free), the line marked
CAUSE.

    ctxlab audit -- examples/realworld/order_graph_replay_after_input_freed.py
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
        del staging  # CAUSE: graph-replays-freed
        other = cupy.full(N, 5, dtype=cupy.float32)  # another stage's array: the same block
        graph.launch(stream)  # HAZARD: graph-replays-freed
        stream.synchronize()
    got = out.get()
    print(f"replayed output 6.0 (twice the staged 3): {int((got == 6.0).sum())} of {N} (expected all); "
          f"10.0 (twice the other array's 5): {int((got == 10.0).sum())}; other array {other.shape}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
