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

from ctxlab.audit.engine import SEVERITIES, Finding, Hit, Stream, finding
from ctxlab.audit.rules_context import (
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
from ctxlab.audit.rules_handles import failed_call, handle_from_another_context, non_primary_current, unordered_handover
from ctxlab.audit.rules_lifetimes import context_leak, stray_context, used_after_teardown

# Functions whose calls carry the user's stack in an audit besides the tracer's context functions and every
# failing call (and the first call of each function per thread and context).
AUDIT_CALLBACKS = ("cuMemAlloc_v2", "cuMemAlloc", "cuCtxSynchronize", "cudaDeviceReset", "cuStreamCreate",
                   "cuStreamCreateWithPriority", "cuEventCreate", "cuEventRecord", "cuEventRecordWithFlags")


@dataclass(frozen=True)
class Rule:
    """A hazard the audit looks for."""

    id: str
    severity: str  # error, warning or info
    title: str  # one line: the hazard
    explanation: str  # what goes wrong, and what to do instead
    claim: str  # the claim id of the lab that demonstrates it
    predicate: Callable[[Stream], list[Hit]]
    cannot_see: str  # what the rule cannot see

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.id}: severity {self.severity!r} is not one of {SEVERITIES}")


# ---------------------------------------------------------------- the rules

RULES: tuple[Rule, ...] = (
    Rule("no-context", "error", "A driver call on a thread that never had a context",
         "A thread starts with no current context. Driver API calls made there before cuCtxSetCurrent, "
         "cuCtxPushCurrent or a runtime call that binds the primary context return CUDA_ERROR_INVALID_CONTEXT.",
         "migrate.driver-call-without-context", no_context,
         "Queries (cuCtxGet*) are how libraries probe for a context and are not judged; driver calls the runtime "
         "makes beneath its own calls are not recorded by CUPTI's activity records; a thread that had a context "
         "and let go of it is not judged."),
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
         "context to modules loaded in another. Launches have only activity records: the location is the "
         "uncaught exception that named the status, or else the thread's last call with a Python stack "
         "(marked nearby). After a reset or destroy it leaves stale handles to those rules."),
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
         "measured (the allocations made in it are counted)."),
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
         "for the primary context is not judged. Reported once per thread and context."),
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
)

SECONDARY = ("failed-call",)  # judged last, over what no other rule explained
FAILED_CALL = Rule("failed-call", "warning", "A call failed with a context error no other rule explains",
                   "CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_CONTEXT_IS_DESTROYED and "
                   "initialisation errors are what users see of context mistakes; the finding names the context "
                   "event before the call (on its thread, else a destroy elsewhere), or says none was seen.",
                   "migrate.driver-call-without-context", lambda s: [],
                   "Names the last context event before the call, which may not be its cause; probes (cuCtxGet*) "
                   "and driver calls a runtime makes beneath its own calls are not reported.")

RULES_BY_ID = {rule.id: rule for rule in (*RULES, FAILED_CALL)}
# A finding of the first rule is dropped where one of the second explains the same thread's calls ("*": a
# finding of that rule on any thread).
SUPERSEDED = {"non-primary-current": ("cross-context-handle",),
              "stray-context": ("non-primary-current", "*fork-after-init")}


def judge(events: list[dict], forks: list[dict] | None = None, exceptions: list[dict] | None = None,
          rules=None) -> list[Finding]:
    """Every rule over the recorded events: the findings, errors first, then in time order. Then the failing
    calls no finding explains get ``failed-call`` (when the default rules run)."""
    stream = Stream(list(events), list(forks or ()), list(exceptions or ()))
    hits: list[tuple[Rule, Hit]] = []
    for rule in rules if rules is not None else RULES:
        hits.extend((rule, hit) for hit in rule.predicate(stream))
    threads = {(rule.id, hit.event.get("tid")) for rule, hit in hits} | {(rule.id, "*") for rule, hit in hits}
    hits = [(rule, hit) for rule, hit in hits
            if not any((other.lstrip("*"), "*" if other.startswith("*") else hit.event.get("tid")) in threads
                       for other in SUPERSEDED.get(rule.id, ()))]
    if rules is None:  # the failing calls of threads no finding is about, that no finding explains
        explained = {id(e) for _, hit in hits for e in (hit.event, *hit.calls)}
        busy = {hit.event.get("tid") for rule, hit in hits if rule.severity in ("error", "warning")}
        hits.extend((FAILED_CALL, hit) for hit in failed_call(stream, explained) if hit.event.get("tid") not in busy)
    out = [(SEVERITIES.index(rule.severity), hit.event.get("start", 0), finding(rule, hit, stream))
           for rule, hit in hits]
    return [f for _, _, f in sorted(out, key=lambda t: (t[0], t[1]))]
