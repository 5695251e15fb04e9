"""The audit's hand-over hook: where the audited program hands a GPU array from one library to another
(DLPack or ``__cuda_array_interface__``), a note with the user's stack, the protocol and what the producer
said about its stream. The rule ``unordered-handover`` sets each note against the calls around it.

The consumers are wrapped when their module is imported (an import hook on ``sys.meta_path``; modules
imported before the audit started are wrapped at once). A wrapper only notes and calls through: the array,
the result and any exception are the library's own.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from ctxlab.audit.child.import_watch import ImportWatch
from ctxlab.tracing.frames import user_stack

# module -> functions that take an array another library made
CONSUMERS: dict[str, tuple[str, ...]] = {
    "cupy": ("asarray", "array", "from_dlpack", "fromDlpack"),
    "torch": ("from_dlpack", "as_tensor", "asarray"),
    "torch.utils.dlpack": ("from_dlpack",),
    "numba.cuda": ("as_cuda_array", "from_cuda_array_interface"),
    "jax.dlpack": ("from_dlpack",),
    "jax.numpy": ("from_dlpack",),
}
HANDOVER = "HANDOVER"


def describe(obj, dlpack_first: bool = False) -> dict | None:
    """What a hand-over passes: the protocol and what it says about the producer's stream; None for an
    object that is no foreign GPU array (a list, a NumPy array, the library's own array). ``dlpack_first``:
    the consumer is a from_dlpack, which asks ``__dlpack__`` (with its stream) before anything else."""
    if type(obj).__name__ == "PyCapsule":
        return {"protocol": "a DLPack capsule", "why": "a capsule carries no stream: nothing orders the consumer"}
    if dlpack_first and hasattr(type(obj), "__dlpack__"):
        return {"protocol": "DLPack (__dlpack__)", "why": "the producer orders only its current stream before the "
                "consumer's", "producer": type(obj).__module__.split(".")[0]}
    interface = getattr(type(obj), "__cuda_array_interface__", None) and getattr(obj, "__cuda_array_interface__",
                                                                               None)
    if isinstance(interface, dict):
        version = interface.get("version")
        if "stream" not in interface:
            why = f"__cuda_array_interface__ v{version} names no stream"
        elif interface.get("stream") is None:
            why = "__cuda_array_interface__ says no synchronisation is needed (stream None)"
        else:
            why = f"__cuda_array_interface__ names stream {interface['stream']}, which the consumer may not wait for"
        return {"protocol": "__cuda_array_interface__", "why": why, "version": version,
                "producer": type(obj).__module__.split(".")[0]}
    if hasattr(type(obj), "__dlpack__"):
        return {"protocol": "DLPack (__dlpack__)", "why": "the producer orders only its current stream before the "
                "consumer's", "producer": type(obj).__module__.split(".")[0]}
    return None


class ExchangeHook:
    """Wraps the consumers while installed; ``note(event)`` receives each hand-over (the tracer's note)."""

    def __init__(self, note: Callable[[dict], None], timestamp: Callable[[], int]) -> None:
        self._note, self._timestamp = note, timestamp
        self._wrapped: list[tuple[object, str, object]] = []
        self._watch = ImportWatch(CONSUMERS, self.wrap_module)
        self.count = 0

    def install(self) -> None:
        """Wrap the consumers of the modules already imported, and of each one imported from now on."""
        self._watch.install()

    def close(self) -> None:
        """Put every consumer back and stop watching imports."""
        self._watch.close()
        for module, attr, original in reversed(self._wrapped):
            setattr(module, attr, original)
        self._wrapped.clear()

    def wrap_module(self, module) -> None:
        """Wrap this module's consumers (once)."""
        for attr in CONSUMERS.get(getattr(module, "__name__", ""), ()):
            original = getattr(module, attr, None)
            if original is None or getattr(original, "__ctxlab_exchange__", False):
                continue
            setattr(module, attr, self._wrapper(f"{module.__name__}.{attr}", original))
            self._wrapped.append((module, attr, original))

    def _wrapper(self, consumer: str, original):
        hook = self

        dlpack_first = consumer.endswith("from_dlpack")

        @functools.wraps(original)
        def consume(obj=None, *args, **kwargs):
            note = None
            try:
                seen = describe(obj, dlpack_first)
                if seen is not None:
                    note = {"domain": "audit", "name": HANDOVER, "consumer": consumer, **seen,
                            "tid": threading.get_native_id(), "start": hook._timestamp(), "stack": user_stack(skip=1)}
            except Exception:  # noting must never change what the program's call does
                note = None
            try:
                return original(obj, *args, **kwargs)
            finally:
                if note is not None:  # noted at its end: what the protocol ordered inside the call counts
                    hook.count += 1
                    note["end"] = hook._timestamp()
                    hook._note(note)

        consume.__ctxlab_exchange__ = True  # type: ignore[attr-defined]
        return consume


def pending_work(stream_events: list[dict], at: int, until: int | None = None) -> dict[int, int]:
    """Launches and asynchronous copies on non-default streams before ``at`` that nothing ordered by ``until``
    (the hand-over's end: what the protocol did inside the consumer's call counts):
    stream handle -> how many. A stream is ordered up to a cuStreamSynchronize of it, a context or device
    synchronisation, or an event recorded on it that was then synchronised or waited for."""
    pending: dict[int, list[int]] = {}
    recorded: dict[int, tuple[int, int]] = {}  # event -> (stream, when recorded)
    until = at if until is None else until
    for e in stream_events:
        if e.get("start", 0) >= until:
            break
        name, args = e.get("name", ""), e.get("args") or {}
        stream = args.get("stream", 0)
        if e.get("domain") != "driver":
            continue
        if name.startswith(("cuLaunch", "cuMemcpy", "cuMemset")) and stream not in (0, 1, 2):
            if e.get("start", 0) >= at:
                continue  # work the consumer queued itself
            pending.setdefault(stream, []).append(e.get("start", 0))
        elif name.startswith("cuStreamSynchronize") and stream:
            pending.pop(stream, None)
        elif name.startswith("cuCtxSynchronize"):
            pending.clear()
        elif name.startswith("cuEventRecord") and args.get("event"):
            recorded[args["event"]] = (stream, e.get("start", 0))
        elif name.startswith(("cuEventSynchronize", "cuStreamWaitEvent")) and args.get("event") in recorded:
            on, when = recorded[args["event"]]
            if on in pending:
                pending[on] = [t for t in pending[on] if t > when]
                if not pending[on]:
                    pending.pop(on)
    return {stream: len(times) for stream, times in pending.items()}
