"""Cases for interop's claims (see tests/claim_cases/__init__.py), on the run recorded on the H200.

Exchange claims are judged over every handover of a pair; the fork and start-method claims over the repeats
of their scenario (``repeat_with`` adds one more repeat whose outcome differs). PyTorch's
``__cuda_array_interface__`` is version 2 and names no stream: the promise's precondition fails (``skipped``) and
``interop.exchange.unnamed-stream`` reports its reads; the PyTorch -> Numba case starts from the recorded run with
the stream named.
"""

from __future__ import annotations

from tests.claim_cases import Case, both, change, edit, forget, in_repeat, repeat_with

F = "interop.json"
WRONG = "silent-wrong-result (got 0, expected 1073741824)"
OTHER = 0x1234  # a context handle that is not the primary one
COPY = 0x7F3A_2000_0000  # a consumer's pointer that is not the producer's: a copy


def _library(name):
    return lambda value: value["library"] == name


def _context_case(lib: str, pointer_promised: bool = True) -> Case:
    breaks = [
        edit("library context", f"alone-{lib}", current=OTHER),  # another context current after init
        edit("together", "together", where=_library(lib), current=OTHER),  # moved once the others loaded
        # `together` runs three times: a foreign context in its last repeat only must break it too
        in_repeat(2, edit("together", "together", where=_library(lib), current=OTHER)),
    ]
    if pointer_promised:
        breaks += [edit("library context", f"alone-{lib}", pointer_context=OTHER),
                   edit("together", "together", where=_library(lib), pointer_context=OTHER),
                   in_repeat(2, edit("together", "together", where=_library(lib), pointer_context=OTHER))]
    return Case(F, breaks=breaks)


def _exchange_case(producer: str, consumer: str, stream_named: bool = True, cai: bool = False) -> Case:
    scenario = f"exchange-{producer}-{consumer}"
    breaks = [
        # the claim compares the pointers (a recording's same_pointer, left saying True here, is the child's)
        edit("exchange", scenario, where=lambda v: v["thread"] == "worker", consumer_pointer=COPY),  # a copy
        edit("exchange", scenario, where=lambda v: v["thread"] == "main", pointer_context=OTHER),
        # a copy in another context: same pointer and primary owner agree (in 3 of 4), but not for every handover
        edit("exchange", scenario, where=lambda v: v["thread"] == "worker", consumer_pointer=COPY,
             pointer_context=OTHER),
        # no owner recorded (and no primary): not owned by the primary context
        edit("exchange", scenario, where=lambda v: v["thread"] == "main", pointer_context=0, primary=0),
    ]
    # the read is promised: one wrong value without an error breaks it, on either thread; so does an error
    breaks += [edit("exchange", scenario, where=lambda v: v["thread"] == "worker", read=WRONG),
               edit("exchange", scenario, where=lambda v: v["thread"] == "main", read="CUDA_ERROR_INVALID_VALUE"),
               edit("exchange", scenario, read="CUDA_ERROR_INVALID_VALUE")]  # an error, never a wrong value
    if stream_named and cai:
        # An interface that names no stream, the values read right: CuPy's with CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION
        # =2 (version 2), Numba's for an array made on no stream (version 3, stream None). On every handover the
        # value is not promised (skipped); on the worker's only, the promise is broken (as PyTorch -> Numba's below).
        unnamed = {"cai_version": 2 if producer == "cupy" else 3, "cai_stream": None}
        # a stream exported under interface version 2: not a promise of order (the stream key is version 3's)
        old = {"cai_version": 2, "cai_stream": 0x5000}
        return Case(F, breaks=[*breaks, edit("exchange", scenario, where=lambda v: v["thread"] == "worker", **unnamed)],
                    unmet=[[edit("exchange", scenario, **unnamed)], [edit("exchange", scenario, **old)]])
    if stream_named:
        return Case(F, breaks=breaks)
    # The recorded run names no stream (the promise's precondition failed: skipped, tests/labs/test_preconditions.py):
    # it holds once the interface names the producer's stream and the reads are right; the recorded wrong reads
    # break it then, and so does one handover out of four that names none.
    named = edit("exchange", scenario, cai_version=3, cai_stream=0x5000)
    breaks += [edit("exchange", scenario, read=WRONG),
               edit("exchange", scenario, where=lambda v: v["thread"] == "worker", cai_version=2, cai_stream=None)]
    return Case(F, keep=[named, edit("exchange", scenario, read="correct")], breaks=breaks,
                unmet=[[], [edit("exchange", scenario, cai_version=2, cai_stream=0x5000)]])


CASES: dict[str, Case] = {
    "interop.cupy.context": _context_case("cupy"),
    "interop.torch.context": _context_case("torch"),
    # cuda.core promises the current context only: its pool allocation (no owning context) is recorded.
    "interop.cuda-core.context": _context_case("cuda-core", pointer_promised=False),
    "interop.exchange.cupy-to-torch": _exchange_case("cupy", "torch"),
    "interop.exchange.torch-to-cupy": _exchange_case("torch", "cupy"),
    "interop.exchange.cupy-to-jax": _exchange_case("cupy", "jax"),
    "interop.exchange.torch-to-jax": _exchange_case("torch", "jax"),
    "interop.exchange.cupy-to-numba": _exchange_case("cupy", "numba", cai=True),
    "interop.exchange.torch-to-numba": _exchange_case("torch", "numba", stream_named=False),
    "interop.exchange.numba-to-cupy": _exchange_case("numba", "cupy", cai=True),
    "interop.exchange.numba-to-torch": _exchange_case("numba", "torch", cai=True),
    "interop.fork.torch": Case(F, breaks=[
        repeat_with("forked child", "fork", torch="correct"),  # PyTorch ran CUDA in the forked child
        repeat_with("forked child", "fork", torch="cudaErrorInitializationError"),  # refused, not with its message
    ], inapplicable=[
        # the parent of one repeat of three could not initialise PyTorch (its child then records torch None and why):
        # PyTorch's refusal cannot be judged in every run, so the run cannot decide it
        [in_repeat(1, edit("forked child", "fork", torch=None, torch_reason="torch: CUDA could not be initialised"))],
    ]),
    "interop.start-methods": Case(F, breaks=[
        repeat_with("start methods", "start-methods",
                    methods={"fork": "cudaErrorInitializationError", "spawn": "cudaErrorInitializationError",
                             "forkserver": "correct"}),
        repeat_with("start methods", "start-methods",
                    methods={"fork": "correct", "spawn": "correct", "forkserver": "no answer within 30 s"}),
    ]),
}


def _cuda_core_under_case(kind: str) -> Case:
    """set_current() makes the primary context current: breaks when the created or green one stays. interop.json
    was recorded before the scenario recorded the id current after the allocation (the claim names it since; it
    reads the recording's own name there): ``now`` records that id, the created or green context's, or another."""
    name = {"created": "the created context", "green": "the green context"}[kind]
    scenario = f"under-{kind}-cuda-core"

    def now(current):
        return both(change("under context", scenario, lambda v: {"after_alloc_id": current(v)}),
                    forget("under context", scenario, "after_alloc_is"))

    return Case(F, breaks=[edit("under context", scenario, after_alloc_is=name),
                           now(lambda v: v["context_id"]), now(lambda v: 7), now(lambda v: None)],
                holds_too=[[now(lambda v: v["primary_id"])]])


def _ipc_case(source: str) -> Case:
    mine = _source(source)
    return Case(F, breaks=[
        edit("ipc", "ipc", where=mine, child__open="cudaErrorInvalidResourceHandle"),  # the child cannot open it
        edit("ipc", "ipc", where=mine, child__at_offset=WRONG),  # opened, but not the parent's values
    ])


def _source(name):
    return lambda value: value["source"] == name


CASES.update({
    "interop.under-created.cuda-core": _cuda_core_under_case("created"),
    "interop.under-green.cuda-core": _cuda_core_under_case("green"),
    **{f"interop.ipc.{source}": _ipc_case(source) for source in ("cuda-bindings", "cupy", "torch")},
})
