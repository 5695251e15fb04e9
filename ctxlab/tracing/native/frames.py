"""Where CPython keeps a thread's frames, for the C callback to read them in place (``cupti_shim.c``, "frames
read in place"): the offsets of its internal structures for the versions whose layout is known, checked by the
C side against a frame whose code and line Python knows before anything is read that way.

The offsets are CPython's own (``Include/cpython/pystate.h``: ``PyThreadState.cframe``;
``Include/internal/pycore_frame.h``: ``_PyCFrame``, ``_PyInterpreterFrame``). Another version, a debug build
(other object headers) or a free-threaded one leaves the older paths in use: frames walked through the C API
with the GIL, or the stack thread's snapshot.
"""

from __future__ import annotations

import ctypes
import sys
import sysconfig

# (tstate -> cframe, cframe -> current frame, frame's code, previous, last instruction, owner, the owner value
# of CPython's own entry frames (-1: none), the bytecode's offset in a code object (-1: its type's basic size))
LAYOUTS = {
    (3, 11): (56, 8, 32, 48, 56, -1, -1, -1),
    (3, 12): (56, 0, 0, 8, 56, 70, 3, -1),
}
OFF_SWITCH = "CTXLAB_STACKS"  # "snapshot": never read frames in place (compare the paths; escape hatch)


def layout() -> tuple[int, ...] | None:
    """This interpreter's layout, or None where it is not known (or reading in place is switched off)."""
    import os

    if os.environ.get(OFF_SWITCH, "") == "snapshot":
        return None
    if hasattr(sys, "gettotalrefcount") or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    known = LAYOUTS.get(sys.version_info[:2])
    if known is None:
        return None
    bytecode = type(layout.__code__).__basicsize__  # offsetof(PyCodeObject, co_code_adaptive)
    return tuple(bytecode if value == -1 and i == 7 else value for i, value in enumerate(known))


def read_in_place(lib: ctypes.CDLL) -> bool:
    """Tell the C side this interpreter's layout; it checks it against this very frame. True if it holds."""
    from ctxlab.tracing.native.locate import address

    known = layout()
    if known is None:
        return False
    api = ctypes.pythonapi
    offsets = (ctypes.c_int32 * 8)(*known)
    here = sys._getframe()
    caller = here.f_back
    if caller is None:
        return False
    check, code, up = lib.ctxlab_read_frames_in_place, id(here.f_code), id(caller.f_code)
    lines, incref = address(api.PyCode_Addr2Line), address(api.Py_IncRef)
    return bool(check(offsets, lines, incref, code, sys._getframe().f_lineno, up))  # the line is this call's


def hold_codes(lib: ctypes.CDLL, frame) -> None:
    """Hold the code objects of a thread's frames in the flight file (the stack thread, at a snapshot), so
    that its next call from the same code is read in place."""
    hold = _holder(lib)
    while frame is not None:
        hold(frame.f_code)
        frame = frame.f_back


_holders: dict[int, object] = {}


def _holder(lib: ctypes.CDLL):
    """``ctxlab_hold_code`` called with the GIL held (it names code objects through the C API)."""
    key = id(lib)
    function = _holders.get(key)
    if function is None:
        function = ctypes.PyDLL(lib._name)["ctxlab_hold_code"]
        function.restype = None
        function.argtypes = [ctypes.py_object]
        _holders[key] = function
    return function
