"""interop's start-method child computes on the device the lab was given (``--device 1``), not on GPU 0.

On the CPU, with the child's own arguments: a stand-in CuPy records which device was made current before the
reduction ran (the child used to ignore its ``device`` argument)."""

from __future__ import annotations

import sys
import types

from ctxlab.labs.interop import fork


class _Pipe:
    def __init__(self) -> None:
        self.sent: list = []
        self.closed = False

    def send(self, value) -> None:
        self.sent.append(value)

    def close(self) -> None:
        self.closed = True


def _stand_in_cupy(calls: list) -> types.ModuleType:
    class Device:
        def __init__(self, n: int) -> None:
            self.n = n

        def use(self) -> None:
            calls.append(("use", self.n))

    class Array:
        def __add__(self, other):
            return self

        def sum(self) -> int:
            calls.append(("sum", None))
            return 55

    cupy = types.ModuleType("cupy")
    cupy.int64 = "int64"
    cupy.arange = lambda n, dtype=None: Array()
    cupy.cuda = types.SimpleNamespace(Device=Device)
    return cupy


def test_the_start_method_child_uses_the_device_it_is_given(monkeypatch):
    for device in (0, 1, 3):
        calls: list = []
        monkeypatch.setitem(sys.modules, "cupy", _stand_in_cupy(calls))
        pipe = _Pipe()
        fork._mp_child(device, pipe)
        assert pipe.sent == ["correct"] and pipe.closed
        assert calls == [("use", device), ("sum", None)], calls  # made current before it computed
