// migrate's verified handoff in C++: the native figure ctxlab's relay is compared with.
//
// T host threads take turns holding the device's primary context. Each handoff
// does what ctxlab's Relay.step does: check that no context is current, push the
// context, check the current context, the context of a runtime allocation and of
// a driver allocation, the __device__ global's address and the stream's context,
// launch one block that sums the array and reads the global (into mapped host
// memory) and then adds 1 to every element and k to the global, synchronise the
// stream, check the sum and the global against what the previous thread left,
// pop (checking the handle), and hand over to the next thread. At the end every
// element and the global are checked.
//
// As in ctxlab's relay, the kernel is launched as soon as the context is current and the host
// checks run while it does; the results are checked after the stream is synchronised.
//
// Ways to hand over, so that ctxlab is compared with the fastest native one:
//   cv      each thread sleeps on its own condition variable; a handoff wakes exactly
//           the next thread
//   spin    one atomic turn counter; each thread polls it, yielding the CPU between
//           polls (no sleep, no wakeup: the next thread sees its turn on its next poll)
//   futex   each thread sleeps on its own futex word; a handoff sets the next word and
//           wakes that thread (one system call each side, no mutex)
//   prewake each thread sleeps on its own futex word; the thread holding the context wakes the next one
//           right after its launch, so that it is awake and polling the turn counter (on a core of its
//           own) by the time the context is popped: no wake-up is left on the handoff's path
//   cv1, futex1   cv or futex with every thread pinned to one core (only one of them
//           runs at a time, so a handoff is a switch on a core whose caches hold the
//           relay's data: what ctxlab's relay does)
//   MODE-drv  any of these with the kernel launched by cuLaunchKernel and the global's address read by
//           cuModuleGetGlobal (the CUfunction and CUmodule looked up once, by cudaGetFuncBySymbol and
//           cuFuncGetModule), as ctxlab's relay does, instead of <<<>>> and cudaGetSymbolAddress: the
//           runtime's launch looks the kernel up in the current context at every call
// The context: the device's primary context bound by the runtime, or one made with cuCtxCreate.
//
//   nvcc -O2 -std=c++17 -o native_relay benchmarks/native_relay.cu -lcuda
//   ./native_relay THREADS ROUNDS [MODE] [primary|created]  -> one line of JSON (its "core": the
//   core of a pinned mode, else -1)
#include <cuda.h>
#include <cuda_runtime.h>

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define N (1 << 13)  // migrate's ARRAY_LEN
#define K 3          // migrate's GLOBAL_STEP
#define BLOCK 1024   // VERIFY_THREADS: verify_and_update runs as one block of this size

#include "../ctxlab/cuda/probe.cu"  // probe_global and verify_and_update: the kernel ctxlab's relay launches

static void fail(const char* what, int code) {
    std::fprintf(stderr, "native_relay: %s failed (%d)\n", what, code);
    std::exit(1);
}
#define DRV(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) fail(#call, (int)r_); } while (0)
#define RT(call) do { cudaError_t r_ = (call); if (r_ != cudaSuccess) fail(#call, (int)r_); } while (0)

struct Turn {  // one condition variable or futex word per thread: a handoff wakes exactly the next thread
    std::mutex m;
    std::condition_variable cv;
    bool go = false;
    std::atomic<int> word{0};
};

static void futex_wait_for(std::atomic<int>& word) {
    while (word.load(std::memory_order_acquire) == 0)
        syscall(SYS_futex, reinterpret_cast<int*>(&word), FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
    word.store(0, std::memory_order_relaxed);
}

static void futex_wake(std::atomic<int>& word) {
    word.store(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<int*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

struct Relay {
    bool driver_api = false;  // -drv: cuLaunchKernel and cuModuleGetGlobal
    CUfunction fn = nullptr;
    CUmodule module = nullptr;
    void* params[4] = {};
    long long n = N, k = K;
    CUcontext ctx = nullptr;
    long long* a = nullptr;
    CUdeviceptr dptr = 0;
    void* global_address = nullptr;
    cudaStream_t stream = nullptr;
    long long* out_host = nullptr;
    long long* out_dev = nullptr;
    long long sum = 0, global = 1000;
    long long verified = 0, mismatches = 0;
};

static CUcontext pointer_context(CUdeviceptr p) {
    CUcontext c = nullptr;
    DRV(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    return c;
}

static bool handoff(Relay& s, std::atomic<int>* wake_next = nullptr);

static void futex_wake(std::atomic<int>& word);

static bool handoff(Relay& s, std::atomic<int>* wake_next) {
    bool ok = true;
    CUcontext cur = nullptr;
    DRV(cuCtxGetCurrent(&cur));
    ok &= cur == nullptr;
    DRV(cuCtxPushCurrent(s.ctx));
    if (s.driver_api) {  // the kernel first, so that every check below runs while it does
        DRV(cuLaunchKernel(s.fn, 1, 1, 1, BLOCK, 1, 1, 0, (CUstream)s.stream, s.params, nullptr));
    } else {
        verify_and_update<<<1, BLOCK, 0, s.stream>>>(s.a, N, K, s.out_dev);
        RT(cudaGetLastError());
    }
    DRV(cuCtxGetCurrent(&cur));
    ok &= cur == s.ctx;
    if (wake_next) futex_wake(*wake_next);  // prewake: the next thread wakes while this one waits for the GPU
    ok &= pointer_context((CUdeviceptr)s.a) == s.ctx;
    ok &= pointer_context(s.dptr) == s.ctx;
    void* address = nullptr;
    if (s.driver_api) {
        CUdeviceptr global = 0;
        size_t size = 0;
        DRV(cuModuleGetGlobal(&global, &size, s.module, "probe_global"));
        address = (void*)global;
    } else {
        RT(cudaGetSymbolAddress(&address, probe_global));
    }
    ok &= address == s.global_address;
    CUcontext stream_ctx = nullptr;
    DRV(cuStreamGetCtx((CUstream)s.stream, &stream_ctx));
    ok &= stream_ctx == s.ctx;
    RT(cudaStreamSynchronize(s.stream));
    ok &= s.out_host[0] == s.sum && s.out_host[1] == s.global;
    s.sum += N;
    s.global += K;
    CUcontext popped = nullptr;
    DRV(cuCtxPopCurrent(&popped));
    ok &= popped == s.ctx;
    return ok;
}

int main(int argc, char** argv) {
    if (argc < 3 || argc > 5) {
        std::fprintf(stderr, "usage: native_relay THREADS ROUNDS [cv|spin|futex|prewake|cv1|futex1][-drv] "
                             "[primary|created]\n");
        return 2;
    }
    const int threads = std::atoi(argv[1]), rounds = std::atoi(argv[2]);
    if (threads < 1 || rounds < 1) { std::fprintf(stderr, "native_relay: THREADS and ROUNDS must be >= 1\n"); return 2; }
    const char* full_mode = argc >= 4 ? argv[3] : "cv";
    const char* kind = argc == 5 ? argv[4] : "primary";
    // MODE-drv: the hand-over MODE with the driver's launch and global lookup
    std::string mode_name(full_mode);
    const bool driver_api = mode_name.size() > 4 && mode_name.compare(mode_name.size() - 4, 4, "-drv") == 0;
    if (driver_api) mode_name.resize(mode_name.size() - 4);
    const char* mode = mode_name.c_str();
    const bool spin = std::strcmp(mode, "spin") == 0;
    const bool futex = std::strcmp(mode, "futex") == 0 || std::strcmp(mode, "futex1") == 0;
    const bool prewake = std::strcmp(mode, "prewake") == 0;
    const bool one_core = std::strcmp(mode, "cv1") == 0 || std::strcmp(mode, "futex1") == 0;
    if (!spin && !futex && !prewake && std::strcmp(mode, "cv") != 0 && std::strcmp(mode, "cv1") != 0) {
        std::fprintf(stderr, "native_relay: mode must be cv, spin, futex, prewake, cv1 or futex1, each with or "
                             "without -drv\n");
        return 2;
    }
    const bool created = std::strcmp(kind, "created") == 0;
    if (!created && std::strcmp(kind, "primary") != 0) {
        std::fprintf(stderr, "native_relay: the context must be primary or created\n");
        return 2;
    }
    const int core = one_core ? sched_getcpu() : -1;  // cv1: the core the relay's threads share
    if (one_core && core < 0) { std::perror("native_relay: sched_getcpu"); return 1; }
    std::atomic<bool> unpinned{false};

    Relay s;
    if (created) {  // cuCtxCreate makes it current; the runtime calls below then use it
        CUdevice dev = 0;
        DRV(cuInit(0));
        DRV(cuDeviceGet(&dev, 0));
#if CUDA_VERSION >= 13000
        DRV(cuCtxCreate(&s.ctx, nullptr, 0, dev));
#else
        DRV(cuCtxCreate(&s.ctx, 0, dev));
#endif
    } else {
        RT(cudaSetDevice(0));
        RT(cudaFree(0));  // the runtime binds the primary context, as ctxlab's primary relay does
        DRV(cuCtxGetCurrent(&s.ctx));
    }
    std::vector<long long> initial(N);
    for (int i = 0; i < N; ++i) { initial[i] = 7LL * i + 11; s.sum += initial[i]; }
    RT(cudaMalloc(&s.a, N * sizeof(long long)));
    RT(cudaMemcpy(s.a, initial.data(), N * sizeof(long long), cudaMemcpyHostToDevice));
    DRV(cuMemAlloc(&s.dptr, 256));
    RT(cudaHostAlloc((void**)&s.out_host, 2 * sizeof(long long), cudaHostAllocMapped));
    RT(cudaHostGetDevicePointer((void**)&s.out_dev, s.out_host, 0));
    RT(cudaMemcpyToSymbol(probe_global, &s.global, sizeof(long long)));
    RT(cudaGetSymbolAddress(&s.global_address, probe_global));
    RT(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    s.driver_api = driver_api;
    if (driver_api) {  // this context's CUfunction and CUmodule of the kernel, looked up once
        cudaFunction_t function = nullptr;
        RT(cudaGetFuncBySymbol(&function, (const void*)verify_and_update));
        s.fn = (CUfunction)function;
        DRV(cuFuncGetModule(&s.module, s.fn));
        s.params[0] = &s.a;
        s.params[1] = &s.n;
        s.params[2] = &s.k;
        s.params[3] = &s.out_dev;
    }
    CUcontext popped = nullptr;
    DRV(cuCtxPopCurrent(&popped));

    std::vector<Turn> turns(threads);
    std::atomic<long long> turn{-1};  // spin: the handoff whose turn it is (-1: not started)
    std::vector<std::thread> workers;
    // The floor: verified handoffs made by one thread, the context pushed and popped by it, no hand-over between
    // threads (counted in the final values, not in the relay's rate).
    const int alone = 2000, warm = 200;  // the first `warm` untimed: the first launch loads the kernel
    long long alone_ok = 0;
    for (int i = 0; i < warm; ++i) alone_ok += handoff(s);
    auto a0 = std::chrono::steady_clock::now();
    for (int i = warm; i < alone; ++i) alone_ok += handoff(s);
    const double alone_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a0).count() / (alone - warm);
    const long long total = (long long)threads * rounds;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < threads; ++i) {
        workers.emplace_back([&, i] {
            if (one_core) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(core, &set);
                if (sched_setaffinity(0, sizeof(set), &set) != 0) unpinned = true;  // 0: this thread
            }
            for (int r = 0; r < rounds; ++r) {
                if (prewake) {
                    const long long mine = (long long)r * threads + i;
                    if (mine > 0 && threads > 1) futex_wait_for(turns[i].word);  // woken during the last handoff
                    while (turn.load(std::memory_order_acquire) != mine) {}
                    const bool more = mine + 1 < total;
                    bool ok = handoff(s, more && threads > 1 ? &turns[(i + 1) % threads].word : nullptr);
                    s.verified += ok;
                    s.mismatches += !ok;
                    turn.store(mine + 1, std::memory_order_release);
                    continue;
                }
                if (spin) {
                    const long long mine = (long long)r * threads + i;
                    while (turn.load(std::memory_order_acquire) != mine) std::this_thread::yield();
                    bool ok = handoff(s);
                    s.verified += ok;
                    s.mismatches += !ok;
                    turn.store(mine + 1, std::memory_order_release);
                    continue;
                }
                if (futex) {
                    futex_wait_for(turns[i].word);
                    bool ok = handoff(s);
                    s.verified += ok;
                    s.mismatches += !ok;
                    if ((long long)r * threads + i + 1 < total) futex_wake(turns[(i + 1) % threads].word);
                    continue;
                }
                {
                    std::unique_lock<std::mutex> lock(turns[i].m);
                    turns[i].cv.wait(lock, [&] { return turns[i].go; });
                    turns[i].go = false;
                }
                bool ok = handoff(s);
                s.verified += ok;
                s.mismatches += !ok;
                Turn& next = turns[(i + 1) % threads];
                if ((long long)r * threads + i + 1 < total) {
                    std::lock_guard<std::mutex> lock(next.m);
                    next.go = true;
                    next.cv.notify_one();
                }
            }
        });
    }
    if (spin || prewake) {
        turn.store(0, std::memory_order_release);
    } else if (futex) {
        futex_wake(turns[0].word);
    } else {
        std::lock_guard<std::mutex> lock(turns[0].m);
        turns[0].go = true;
        turns[0].cv.notify_one();
    }
    for (auto& w : workers) w.join();
    if (unpinned) { std::fprintf(stderr, "native_relay: %s: a thread could not be pinned to core %d\n", full_mode, core); return 1; }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    DRV(cuCtxPushCurrent(s.ctx));
    std::vector<long long> final_values(N);
    RT(cudaMemcpy(final_values.data(), s.a, N * sizeof(long long), cudaMemcpyDeviceToHost));
    long long final_global = 0;
    RT(cudaMemcpyFromSymbol(&final_global, probe_global, sizeof(long long)));
    bool every = final_global == 1000 + K * (total + alone) && alone_ok == alone;
    for (int i = 0; i < N; ++i) every &= final_values[i] == initial[i] + total + alone;
    DRV(cuCtxPopCurrent(&popped));
    if (created) DRV(cuCtxDestroy(s.ctx));
    std::printf("{\"mode\": \"%s\", \"context\": \"%s\", \"threads\": %d, \"rounds\": %d, \"handoffs\": %lld, \"verified\": %lld, \"mismatches\": %lld, "
                "\"final_ok\": %s, \"seconds\": %.6f, \"verified_per_s\": %.1f, \"core\": %d, \"alone_us\": %.3f}\n",
                full_mode, kind, threads, rounds, total, s.verified, s.mismatches, every ? "true" : "false", seconds,
                s.verified / seconds, core, alone_us);
    return every && s.mismatches == 0 ? 0 : 1;
}
