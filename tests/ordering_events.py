"""Ordering-model streams on top of ``tests.audit_events.Events``: calls one after another (each 10 ns after
the last, on its own line of the program), with the streams, events, copies, kernels (their kept arguments)
and allocator-hook notes the model reads."""

from __future__ import annotations

import struct

from tests.audit_events import MAIN, PRIMARY, Events

A, B, C = 0xA1, 0xB2, 0xC3  # stream handles
BASE = 0x7F0000000000


def launch_blob(*pointers: int) -> bytes:
    """Kept launch arguments (``ctxlab.audit.model.hooks.arguments``' format): one 8-byte pointer argument each."""
    return b"".join(struct.pack("<IIQ", i, 8, p) for i, p in enumerate(pointers))


class Calls(Events):
    """Calls in time order; each returns its event, and each is on line ``n`` for the n-th call."""

    def __init__(self) -> None:
        super().__init__()
        self.t = 0

    def at(self, name: str, *, domain: str = "driver", tid: int = MAIN, dur: int = 2, status: str | None = None,
           **args) -> dict:
        self.t += 10
        raw = args.pop("raw", None)
        extra = {"arguments": raw} if raw is not None else {}
        return self.call(domain, name, self.t, end=self.t + dur, tid=tid, status=status, context=PRIMARY,
                         line=len(self.events) + 1, args=args, **extra)

    def hook(self, name: str, tid: int = MAIN, **fields) -> dict:
        """An allocator or library hook's note: as ``ctxlab.audit.child.allocators.Notes`` makes it, with no context
        (a hook runs in Python, outside any CUDA call)."""
        self.t += 10
        event = self.observed(name, self.t, tid=tid, line=len(self.events) + 1, **fields)
        del event["context"]
        return event

    def stream(self, handle: int, flags: int = 0) -> dict:
        return self.at("cuStreamCreate", stream=handle, flags=flags)

    def alloc(self, ptr: int = BASE, size: int = 1 << 20) -> dict:
        return self.at("cuMemAlloc_v2", ptr=ptr, size=size)

    def kernel(self, stream: int, *pointers: int, tid: int = MAIN) -> dict:
        return self.at("cuLaunchKernel", stream=stream, function=0xF00, raw=launch_blob(*pointers), tid=tid)

    def h2d(self, ptr: int, stream: int) -> dict:
        return self.at("cuMemcpyHtoDAsync_v2", ptr=ptr, size=64, stream=stream)

    def d2h(self, src: int, stream: int) -> dict:
        return self.at("cuMemcpyDtoHAsync_v2", src=src, size=64, stream=stream)

    def event(self, handle: int) -> dict:
        return self.at("cuEventCreate", event=handle)

    def record(self, event: int, stream: int) -> dict:
        return self.at("cuEventRecord", event=event, stream=stream)

    def wait(self, stream: int, event: int) -> dict:
        return self.at("cuStreamWaitEvent", stream=stream, event=event)

    def sync(self, stream: int, tid: int = MAIN) -> dict:
        return self.at("cuStreamSynchronize", stream=stream, tid=tid, dur=5)
