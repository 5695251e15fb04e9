"""The audit's rules: each a small declared object with a predicate over the recorded event stream, and
``judge``, which runs them.

A rule names the lab claim (``ctxlab claims``) whose run demonstrates the hazard on a real GPU, says in
one line what goes wrong, and what it cannot see. Its predicate returns ``Hit`` objects; messages are
built from the values observed (calls, statuses, threads), never from what the rule expected to see. The
predicates live in ``rules_context`` (which context a thread has), ``rules_lifetimes`` (a context's life)
and ``rules_handles`` (handles of another context, hand-overs, failing calls).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxlab.audit.engine import SEVERITIES, Finding, Hit, RunInfo, Stream, finding
from ctxlab.audit.rules.classes import (
    capture_violation,
    freed_memory_used,
    handle_destroyed,
    launch_config,
    out_of_memory,
)
from ctxlab.audit.rules.context import (
    cross_context_handle,
    destroyed_while_current,
    fork_after_init,
    green_context_on_two_threads,
    no_context,
    pointer_from_another_context,
    primary_released_under_runtime,
    reset_with_live_allocations,
    several_runtime_copies,
)
from ctxlab.audit.rules.endings import program_crashed, program_hung
from ctxlab.audit.rules.failures import failed_call, sticky_error
from ctxlab.audit.rules.handles import handle_from_another_context, non_primary_current, unordered_handover
from ctxlab.audit.rules.lifetimes import context_leak, stray_context, used_after_teardown
from ctxlab.audit.rules.ordering import (
    freed_while_in_use,
    graph_replays_freed,
    ipc_interior_pointer,
    library_not_watched,
    unordered_access,
    wait_orders_nothing,
)
from ctxlab.audit.rules.recording import recording_full
from ctxlab.audit.rules.settings import setting_changed_under

ORDERING_SEES = ("Follows streams, events, copies, memsets, frees and graphs made while tracing, with the "
                 "blocks CuPy's and PyTorch's pools hand out (the audit's allocator hooks); a kernel's memory is "
                 "read from the arguments of driver launches (CuPy, Numba, cuda.bindings; PyTorch's kernels show "
                 "none), and a kernel is taken to write a block nothing touched before or its only block, else to "
                 "read it. Host synchronisation counts for every thread once it returned; order made by other means "
                 "(a spin on host memory, cuStreamWaitValue) is not seen.")
# The rules below it stand on the calls' own statuses and parameters: no lab claim demonstrates them.
NO_CLAIM = ""


@dataclass(frozen=True)
class Rule:
    """A hazard the audit looks for."""

    id: str
    severity: str  # error, warning or info
    title: str  # one line: the hazard
    explanation: str  # what goes wrong, and what to do instead
    claim: str  # the claim id of the lab that demonstrates it, or NO_CLAIM
    predicate: Callable[[Stream], list[Hit]]
    cannot_see: str  # what the rule cannot see
    # a finding of this rule is dropped where one of these explains the same thread's calls ("*": on any thread)
    superseded_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.id}: severity {self.severity!r} is not one of {SEVERITIES}")


# ---------------------------------------------------------------- the rules

RULES: tuple[Rule, ...] = (
    Rule("no-context", "error", "A driver call on a thread that never had a context",
         "A thread starts with no current context. Driver API calls made there before cuCtxSetCurrent, "
         "cuCtxPushCurrent or a runtime call that binds the primary context return CUDA_ERROR_INVALID_CONTEXT.",
         "migrate.driver-call-without-context", no_context,
         "Queries (cuCtxGet*) are how libraries probe for a context and are not judged here; driver calls the "
         "runtime makes beneath its own calls are the runtime's (it binds a context next); a thread that had a "
         "context and let go of it is not judged (its failing calls are failed-call findings)."),
    Rule("destroyed-while-current", "error", "A context destroyed while current on another thread",
         "cuCtxDestroy does not unbind the context from other threads: it stays current there and every call "
         "they make into it returns CUDA_ERROR_CONTEXT_IS_DESTROYED. Hand the context back (pop it) on every "
         "thread before destroying it.",
         "refcount.destroy-while-current-elsewhere", destroyed_while_current,
         "Needs CUPTI's CONTEXT_DESTROY_STARTING event and a call on the other thread that fails afterwards; a "
         "thread that holds the destroyed context but makes no further call is not reported."),
    Rule("primary-released-under-runtime", "error", "The primary context released to zero under the runtime",
         "The runtime holds a reference to the primary context it uses. A cuDevicePrimaryCtxRelease the program "
         "did not balance with a retain can take the count to zero: the context, its memory and modules are "
         "destroyed while the runtime (CuPy, PyTorch) still uses it, and its later calls fail.",
         "refcount.after-last-release", primary_released_under_runtime,
         "Sees the release that destroyed the context only through CUPTI's CONTEXT_DESTROY_STARTING inside the "
         "release call; needs runtime calls before it and failing calls after it; releases the runtime makes "
         "itself (inside cudaDeviceReset) are left to reset-with-live-allocations."),
    Rule("reset-with-live-allocations", "error", "A device reset with allocations still in use",
         "cudaDeviceReset and cuDevicePrimaryCtxReset destroy every allocation, module and stream of the "
         "device's primary context, whoever else retains it. Pointers and cached kernels from before are invalid; "
         "calls that use them fail.",
         "refcount.device-reset-destroys", reset_with_live_allocations,
         "Cannot follow pointers: it reports a reset preceded by successful allocations and followed by failing "
         "calls, not which allocation each failing call used. Allocations made before tracing began are not seen."),
    Rule("cross-context-handle", "error", "A kernel loaded in one context launched in another",
         "Modules and functions belong to the context they were loaded in. CuPy's compiled-kernel cache is per "
         "device: a kernel first used under one context and launched under another fails with "
         "CUDA_ERROR_INVALID_HANDLE. Use one context per device (the primary context), or the "
         "context-independent library API (cuLibraryLoad*).",
         "migrate.cupy-kernel-cache-across-contexts", cross_context_handle,
         "Cannot see which function handle a launch used: it relates an invalid-handle launch or lookup in one "
         "context to modules loaded in another. A launch's location is its own stack (the C callback takes one "
         "for every launch in an audit), else the uncaught exception that named the status, else the thread's "
         "last call with a Python stack (marked nearby). After a reset or destroy it leaves stale handles to "
         "those rules."),
    Rule("fork-after-init", "error", "CUDA used in a child forked after initialisation",
         "CUDA is not fork-safe: in a child made by fork after the parent initialised CUDA, every driver call "
         "returns CUDA_ERROR_NOT_INITIALIZED (CuPy: cudaErrorInitializationError; PyTorch refuses). Start "
         "children with 'spawn' or 'forkserver', or fork before the first CUDA call.",
         "interop.start-methods", fork_after_init,
         "Seen through os.register_at_fork in the audited process: in a child forked after CUPTI saw CUDA "
         "initialised, the first call into a CUDA library module (cupy, cuda.*, torch.cuda, numba.cuda, jax) is "
         "noted with its stack and CUDA's state there is probed with cuInit; a child made by a fork the Python "
         "interpreter did not perform (a C library's own fork) or exec'ing another program is not seen."),
    Rule("several-runtime-copies", "info", "Several copies of the CUDA runtime in one process",
         "Each copy of the CUDA runtime in the process (CuPy's, cuda.bindings', a library's statically linked "
         "one) retains the primary context when it initialises and has its own state. A cudaDeviceReset through "
         "one copy destroys the context under the others.",
         "refcount.reference-per-runtime-copy", several_runtime_copies,
         "Counts the copies of the runtime that retained the primary context beneath one of their calls (the "
         "first call of each copy on a device), each named by its shared object (the first past the driver on "
         "the retain's native stack, with the object that called it); where that stack was not kept, each such "
         "runtime call counts as a copy and the finding says the copies are unnamed."),
    Rule("pointer-from-another-context", "warning", "A kernel argument pointing into another context's memory",
         "A kernel launched in one context was given an address inside memory allocated in another context of "
         "the same process. On the H200 such a kernel reads it correctly, but the memory's lifetime belongs to "
         "the context that allocated it: it is freed when that context is destroyed or reset, and a memory pool "
         "of that context (CuPy's per-device pool) may hand the block to someone else. Allocate under the "
         "context that launches, or keep one context per device.",
         "migrate.own-address-space", pointer_from_another_context,
         "Reads arguments of cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel (also the _ptsz "
         "forms) at their entry: every 8-byte-aligned word of each argument of 8 bytes or more (sizes from "
         "cuFuncGetParamInfo, CUDA 12.4+), so a pointer member of a struct argument and a pointer offset into an "
         "allocation are found; arguments packed in the extra buffer (CU_LAUNCH_PARAM_BUFFER_POINTER) too. It "
         "cannot see: pointers stored in device memory (an array of pointers, a struct passed by pointer); "
         "launches made through the runtime (cudaLaunchKernel) unless the runtime calls cuLaunchKernel beneath "
         "(the audit's stats count the launch callbacks against cuLaunchKernel's records); graph launches; "
         "memory allocated before tracing began, through cuMemCreate/cuMemMap (VMM) or cuMemHostAlloc, or by a "
         "library's own allocator that does not call cuMemAlloc*; a word that happens to equal an address is "
         "read as a pointer. A launch with the same function, context and argument bytes is inspected once. "
         "Green and primary contexts share memory by design and are not reported."),
    Rule("green-context-on-two-threads", "error", "A green context current on two threads at once",
         "The Driver API says a green context may be current to only one thread at a time and that calls into "
         "it from several threads are not synchronised. The driver does not stop a second thread from pushing "
         "it: both threads' calls run. Hand the green context over (pop it, then push it on the other thread), "
         "or give each thread its own green context.",
         "migrate.green-one-thread-at-a-time", green_context_on_two_threads,
         "Knows a green context by the CUcontext cuCtxFromGreenCtx returned while tracing and by the contexts "
         "created inside cuGreenCtxCreate (CUPTI names the current green context by one of those, not by "
         "cuCtxFromGreenCtx's handle, on driver 580); green contexts made before tracing began are not known. "
         "A thread holds it "
         "from the first call that ran with it current to the last one before a call with another context: "
         "a thread that made it current and then makes no call is not seen holding it, and thread exits are not "
         "seen. A green context whose handle equals the primary context's is not judged."),
    Rule("stray-context", "warning", "A context on a device where nothing ran",
         "A library made the primary context of a GPU (cudaSetDevice, cudaMemGetInfo, torch.cuda.synchronize, "
         "a JAX backend) and no kernel, copy or memset ever ran in it: the context holds GPU memory and the device "
         "for the life of the process (found through nvidia-smi or an out-of-memory error elsewhere). Keep "
         "CPU-only programs off the CUDA API and have helper threads select their GPU before any CUDA call.",
         "lifecycle.set-device-initialises", stray_context,
         "Judges primary contexts made while tracing: a context made before tracing began, or one whose only use "
         "is a kernel launched through a graph the tracer cannot see, is not judged; memory it holds is not "
         "measured (the allocations made in it are counted).",
         superseded_by=("non-primary-current", "*fork-after-init")),
    Rule("context-leak", "warning", "A context pushed and never popped, popped wrongly, or never destroyed",
         "A context the program created stays alive until cuCtxDestroy: one made per request or per thread and "
         "never destroyed holds its memory for good. A thread that ends with contexts pushed leaves them retained; "
         "a cuCtxSetCurrent between a push and its pop makes the pop take another context. Pop in finally, destroy "
         "what you create.",
         "refcount.thread-exit", context_leak,
         "Follows each thread's context stack from its own push, pop, set and create calls made while tracing "
         "(not those a runtime makes beneath its calls); a thread still running when tracing stops is not judged "
         "for what it left pushed; contexts made before tracing began are not known."),
    Rule("handle-from-another-context", "error", "A stream or event used with another context",
         "Streams and events belong to the context current when they were made. cuEventRecord on a stream of "
         "another context, a launch or copy on a stream of a context that is not current, or the time between "
         "events of two contexts fail with CUDA_ERROR_INVALID_HANDLE (or silently run elsewhere).",
         "migrate.state-follows-context", handle_from_another_context,
         "Knows the streams and events made while tracing (cuStreamCreate*, cuEventCreate, CUPTI's stream "
         "events); handles made before tracing began, or by a runtime copy through paths CUPTI does not show, are "
         "not judged. cuStreamWaitEvent on an event of another context is allowed and not reported."),
    Rule("non-primary-current", "warning", "A primary-context library working under a created context",
         "CuPy, PyTorch and the runtime's own caches are made for the primary context; Numba refuses any other. "
         "With a context from cuCtxCreate (pycuda.autoinit-style code) current, their calls run in it: cached "
         "kernels and streams fail with invalid resource handle (error 400), or memory lands where it should not.",
         "lifecycle.runtime-uses-created-context", non_primary_current,
         "Sees runtime calls that do work (not queries) and primary-context retains made by a library while a "
         "context created with cuCtxCreate is current; a library that uses the driver API alone and never asks "
         "for the primary context is not judged. Reported once per thread and context.",
         superseded_by=("cross-context-handle",)),
    Rule("used-after-teardown", "error", "Memory, a stream or an event used after its context was destroyed",
         "Destroying a context (cuCtxDestroy, releasing the primary context to zero) frees its memory, streams and "
         "events. A destructor or an atexit handler that frees or uses them afterwards gets "
         "CUDA_ERROR_INVALID_CONTEXT or CUDA_ERROR_CONTEXT_IS_DESTROYED, often at exit, where nobody looks.",
         "refcount.after-last-release", used_after_teardown,
         "Follows pointers of allocations, streams and events made while tracing; the calls of the program's "
         "teardown (its globals let go, atexit handlers) are traced, the interpreter's own finalisation is not."),
    Rule("unordered-handover", "warning", "An array handed between libraries with no stream order",
         "An array handed over through DLPack or __cuda_array_interface__ without the consumer's stream (a "
         "legacy capsule, CAI v2 with no stream) while the producer's work on another stream was not ordered "
         "before it can be read before it is written: silent wrong values.",
         "interop.exchange.torch-to-numba", unordered_handover,
         "Needs the audit's hand-over records of the consumers it knows (cupy.asarray/from_dlpack, torch.from_dlpack/"
         "as_tensor, numba.cuda.as_cuda_array, jax.dlpack.from_dlpack); launches made before the hand-over on other "
         "streams, with no synchronisation or event between by the consumer's return, count as pending. A JAX array "
         "handed over through __dlpack__ is ordered by JAX itself (its array waits for its own events) and is not "
         "judged; the consumer's stream is not known, so work it already waits for by other means may be counted."),
    Rule("sticky-error", "error", "A kernel faulted: the context is poisoned, every later call fails",
         "An illegal address, a misaligned access, a device-side assert, a launch failure or an illegal instruction "
         "in a kernel is sticky: the context cannot be used any more, and every later call into it, of every "
         "library, returns the error. Launches are asynchronous, so the error surfaces at a later synchronisation "
         "or copy, far from its cause. The finding names the launches made into the context since its last "
         "successful synchronisation (the newest first), folds every later failing call into one finding, and "
         "with --pin re-runs the program with launches serialised (CUDA_LAUNCH_BLOCKING=1) to name the launch.",
         NO_CLAIM, sticky_error,
         "Knows launches made while tracing through cuLaunchKernel*, cuLaunchCooperativeKernel, cudaLaunchKernel "
         "and graph launches; kernel names come from cuFuncGetName (CUDA 12.3+), so a runtime launch whose driver "
         "launch the runtime hides is named by its call. Without --pin the faulting launch is one of those named, "
         "not certainly the newest."),
    Rule("capture-violation", "error", "A call that breaks a CUDA graph capture in progress",
         "While a stream captures a graph, calls that would synchronise or use the legacy stream (a synchronous "
         "copy, cudaMalloc, a device or stream synchronisation) are not allowed; in global mode (PyTorch's "
         "default) such a call from any thread is refused. The call fails and the capture is invalidated: its "
         "end call fails too.",
         NO_CLAIM, capture_violation,
         "Follows captures begun and ended while tracing (cuStreamBeginCapture*, cudaStreamBeginCapture); a call "
         "that fails with a capture status when no capture was recorded is named with the last capture begun."),
    Rule("freed-memory-used", "error", "Memory used or freed again after it was freed",
         "A pointer freed with cuMemFree or cudaFree may already back another allocation: freeing it again "
         "returns CUDA_ERROR_INVALID_VALUE (or frees someone else's memory), and copying, setting or passing it to "
         "a kernel reads or writes memory that is no longer yours (an illegal address, or silent corruption).",
         NO_CLAIM, freed_memory_used,
         "Follows allocations made while tracing through cuMemAlloc* and cudaMalloc (not a library pool's reuse of "
         "its own blocks, which never reaches the driver); kernel arguments are read for every driver launch "
         "(cuLaunchKernel*, cuLaunchCooperativeKernel), each distinct launch once; a runtime launch the runtime "
         "makes with no driver launch beneath it (PyTorch's) shows none."),
    Rule("handle-destroyed", "error", "A stream, event or module used after it was destroyed",
         "cuStreamDestroy, cuEventDestroy and cuModuleUnload end a handle's life; a later call passing it gets "
         "CUDA_ERROR_INVALID_HANDLE or CUDA_ERROR_INVALID_CONTEXT, or, where its value was reused, works on "
         "another object.",
         NO_CLAIM, handle_destroyed,
         "Knows the handles made and destroyed while tracing by the driver calls that take them."),
    Rule("out-of-memory", "error", "An allocation ran out of memory while the process held memory elsewhere",
         "An allocation failed for lack of GPU memory. The finding says what the process itself held then: the "
         "bytes each library allocated and did not free (CuPy's and PyTorch's pools keep freed memory for reuse) "
         "and the contexts alive on that GPU, each with memory of its own.",
         NO_CLAIM, out_of_memory,
         "Counts allocations made through cuMemAlloc* and cudaMalloc while tracing; memory of other processes and "
         "a context's own reservation are not measured."),
    Rule("launch-config", "error", "A kernel launch refused for its configuration",
         "A launch whose block has more than 1024 threads, a depth over 64, or more dynamic shared memory than "
         "the kernel may use without cuFuncSetAttribute is refused (CUDA_ERROR_INVALID_VALUE, invalid "
         "configuration argument); a block whose registers do not fit fails with too many resources requested.",
         NO_CLAIM, launch_config,
         "Reads grid, block and shared memory of cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and "
         "cudaLaunchKernel (a grid's depth is not kept)."),
    Rule("setting-changed-under", "warning", "A context- or process-wide setting changed under another library",
         "Limits (cuCtxSetLimit, cudaDeviceSetLimit: stack size, printf FIFO, malloc heap, persisting L2), device and "
         "context flags, the cache and shared memory configuration and memory pool attributes (the release "
         "threshold) are shared by every library and thread using the context or pool. One library changing what "
         "another set, or relied on, changes how the other's kernels, synchronisations and allocations behave: a "
         "kernel that runs out of stack or heap, a pool that keeps or releases memory, a sync that spins or blocks.",
         NO_CLAIM, setting_changed_under,
         "Follows the settings made while tracing through the calls named, by their kept parameters; settings made "
         "before tracing began, per-function attributes, and CUDA_VISIBLE_DEVICES changed after CUDA started (the "
         "child does not watch os.environ) are not seen. A change under another that only relied on the old value "
         "is reported where a call of the other that depends on it failed after the change."),
    Rule("freed-while-in-use", "error", "Memory freed while another stream's work still uses it",
         "A stream-ordered free (cuMemFreeAsync) is ordered only on its own stream, and a pool (CuPy's, PyTorch's "
         "caching allocator) hands a freed block to the next allocation on the stream it was allocated on. Work "
         "on another stream that uses the memory and is not ordered before the free can read what the next owner "
         "writes, or overwrite it: silent wrong values, no error.",
         NO_CLAIM, freed_while_in_use, ORDERING_SEES),
    Rule("unordered-access", "error", "Two streams access the same memory with nothing ordering them",
         "Work on different streams runs in any order unless an event wait, a synchronisation or the legacy "
         "default stream's implicit synchronisation orders it. A read after another stream's write, or a write "
         "after another stream's use, with none of those between, races: the result depends on timing.",
         NO_CLAIM, unordered_access, ORDERING_SEES, superseded_by=("unordered-handover",)),
    Rule("wait-orders-nothing", "warning", "A stream waits on an event that was never recorded",
         "cuStreamWaitEvent on an event with no record does nothing, and a library's event that was never "
         "recorded (PyTorch creates its CUDA event at the first record) makes no call at all: the work after the "
         "wait is ordered after nothing, though the code reads as if it waited.",
         NO_CLAIM, wait_orders_nothing,
         "Knows events created and recorded while tracing; an event made before tracing began is not judged. "
         "PyTorch's torch.cuda.Event.wait is seen through the audit's hook."),
    Rule("graph-replays-freed", "error", "A CUDA graph replayed after memory it was captured with was freed",
         "A graph's kernels and copies work on the addresses they were captured with. Freeing a captured input or "
         "output and launching the graph again makes the replay read or write memory that may now belong to "
         "another array.",
         NO_CLAIM, graph_replays_freed, ORDERING_SEES),
    Rule("ipc-interior-pointer", "warning", "An IPC handle exported for a pointer inside an allocation",
         "cuIpcGetMemHandle names the whole allocation: the process that opens the handle maps the allocation's "
         "base. A pointer into a pool's block inside a larger allocation (CuPy's and PyTorch's pools) reaches the "
         "peer as the wrong address unless its offset is sent beside the handle.",
         NO_CLAIM, ipc_interior_pointer,
         "Knows allocations made while tracing; the offset the program may send beside the handle is not seen, "
         "so a program that does send it is reported too (the finding says the offset to send)."),
    Rule("library-not-watched", "info", "A library's pool or events the audit could not watch",
         "The ordering model learns CuPy's and PyTorch's pool blocks, record_stream and PyTorch's events through "
         "hooks installed as the library is imported. Where a version's internals differ, the hook is not "
         "installed and the library runs untouched; the hazards that need it are not judged, and this finding "
         "says which, with the error, so a clean report does not read as a judged one.",
         NO_CLAIM, library_not_watched,
         "Only the libraries the audit hooks (CuPy, PyTorch); another library's own pool is not watched and not "
         "reported here."),
    Rule("recording-full", "warning", "The flight recording filled up: part of the run is not judged",
         "The C callback writes every call into a file mapped in shared memory, bounded by --record-limit (or "
         "half the free disk where it lies). Once it is full, what does not fit is counted, not written, and the "
         "program runs on. The findings then cover the calls that were recorded; this finding says how many "
         "calls, stacks and argument bytes were dropped, so a clean report of a truncated run does not read as "
         "clean.",
         NO_CLAIM, recording_full,
         "Which calls were dropped is not known, only how many: they came after the last recorded one."),
    Rule("program-crashed", "error", "The program died by a signal",
         "A segfault, an abort or a SIGKILL ends the process without a Python traceback. The audit runs the "
         "program in a child whose CUDA calls go to shared memory as they happen, so everything up to the crash is "
         "reported, with where the crashing thread was (faulthandler's stacks) and the CUDA call it was inside.",
         NO_CLAIM, program_crashed,
         "A SIGKILL leaves no Python stack: the thread's last recorded call is named instead."),
    Rule("program-hung", "error", "The program hung inside a CUDA call",
         "A thread stayed inside one CUDA call: past the audit's --timeout, with no CUDA progress for --stall "
         "seconds, or until the program ended itself (its watchdog's os._exit, faulthandler's exit, a signal's "
         "default action, a kill). The finding names the call each stuck thread "
         "was inside and for how long, whether it held the GIL, its Python stack, and the work it waits for (host "
         "functions and kernels launched before it).",
         NO_CLAIM, program_hung,
         "A thread that waits in Python (a lock, a queue) is named with the others' positions, not as a finding "
         "of its own; whether a host function is still running is inferred from its launch and the stuck "
         "synchronisation."),
    Rule("failed-call", "error", "A CUDA call failed",
         "Every call that returned anything but success and that no rule above explains and no library probed on "
         "purpose: the finding says what the call met (the thread's current context and who made it, the "
         "runtime's device, the contexts and lives of the handles and memory it passed, a sticky error, a capture "
         "in progress) and who made the call.",
         NO_CLAIM, failed_call,
         "A library's failing call that it handles itself is told apart only by evidence: a successful call "
         "around it, or the probe catalogue (ctxlab.audit.rules.probes), each entry backed by a clean program."),
)

RULES_BY_ID = {rule.id: rule for rule in RULES}


def judge(events: list[dict], forks: list[dict] | None = None, exceptions: list[dict] | None = None,
          rules=None, run: RunInfo | None = None) -> list[Finding]:
    """Every rule over the recorded events: the findings, errors first, then in time order."""
    return judge_stream(Stream(list(events), list(forks or ()), list(exceptions or ()), run=run), rules)


def judge_stream(stream: Stream, rules=None) -> list[Finding]:
    """The rules, in their tuple's order, over one stream: each rule's findings mark the calls they account for
    (``Stream.explained``), which the later rules read (``failed-call``, last, reports what no rule explained);
    then a finding of a rule superseded by another's on the same thread is dropped."""
    from ctxlab.audit.model.one_pass import model

    hits: list[tuple[Rule, Hit]] = []
    failures = model(stream)
    for rule in rules if rules is not None else RULES:
        found = rule.predicate(stream)
        for hit in found:  # a finding accounts for every call of each failure it names
            stream.explained.update(failures.expand({id(e) for e in (hit.event, *hit.calls, *hit.explains)}))
        hits.extend((rule, hit) for hit in found)
    threads = {(rule.id, hit.event.get("tid")) for rule, hit in hits} | {(rule.id, "*") for rule, hit in hits}
    hits = [(rule, hit) for rule, hit in hits
            if not any((other.lstrip("*"), "*" if other.startswith("*") else hit.event.get("tid")) in threads
                       for other in rule.superseded_by)]
    out = [(SEVERITIES.index(rule.severity), hit.event.get("start", 0), finding(rule, hit, stream))
           for rule, hit in hits]
    return [f for _, _, f in sorted(out, key=lambda t: (t[0], t[1]))]
