"""The user's Python stack at a traced call: frames outside ctxlab, site-packages and the standard library.

Taken by the tracer's stack thread for a thread blocked in a call (and in the audit's fork, exception and
hand-over hooks), so it must be cheap: frames are walked with ``sys._getframe`` and each file's verdict
(user code or not) is cached.
A frame is the user's when its file exists here and lies outside ctxlab's package, the standard
library and any site-packages/dist-packages directory, or when it is code given with ``-c``
(``<string>``). Compiled extensions (CuPy's ``.pyx`` frames in tracebacks) are not user code.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType, TracebackType

USER_FRAMES = 8  # the user frames a stack keeps, innermost first

_verdicts: dict[str, bool] = {}
_excluded: tuple[str, ...] | None = None


def _excluded_dirs() -> tuple[str, ...]:
    global _excluded
    if _excluded is None:
        dirs = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # ctxlab's package, not tracing/'s
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                dirs.add(os.path.realpath(path))
                dirs.add(os.path.abspath(path))
        _excluded = tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))
    return _excluded


def is_user_file(filename: str) -> bool:
    """Whether frames of this file are the user's own code (cached per file name)."""
    verdict = _verdicts.get(filename)
    if verdict is None:
        verdict = _judge(filename)
        _verdicts[filename] = verdict
    return verdict


def _judge(filename: str) -> bool:
    if filename in ("<string>", "<stdin>"):
        return True
    if filename.startswith("<") or filename.endswith((".pyx", ".pxd", ".pxi")):
        return False
    parts = filename.replace("\\", "/").split("/")
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    if not os.path.isfile(filename):
        return False
    full = os.path.abspath(filename)
    real = os.path.realpath(filename)
    excluded = _excluded_dirs()
    # ctxlab's own package is excluded, but not the rest of its repository (examples, tests)
    return not (full.startswith(excluded) or real.startswith(excluded))


def shown(filename: str) -> str:
    """A file as reports show it: relative to the working directory when it lies below it."""
    if filename.startswith("<"):
        return filename
    full = os.path.abspath(filename)
    cwd = os.getcwd() + os.sep
    return os.path.relpath(full) if full.startswith(cwd) else full


def frame_stack(frame: FrameType | None, limit: int = USER_FRAMES) -> list[list]:
    """The user frames from ``frame`` outwards, innermost first: ``[file, line, function]`` each."""
    out: list[list] = []
    while frame is not None and len(out) < limit:
        code = frame.f_code
        if is_user_file(code.co_filename):
            out.append([shown(code.co_filename), frame.f_lineno, code.co_name])
        frame = frame.f_back
    return out


def user_stack(skip: int = 1, limit: int = USER_FRAMES) -> list[list]:
    """The calling thread's user frames, innermost first, leaving out ``skip`` frames of the caller's own."""
    try:
        frame: FrameType | None = sys._getframe(skip + 1)
    except ValueError:
        return []
    return frame_stack(frame, limit)


def traceback_stack(tb: TracebackType | None, limit: int = USER_FRAMES) -> list[list]:
    """The user frames of an exception's traceback, innermost (where it was raised) first."""
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if is_user_file(code.co_filename):
            frames.append([shown(code.co_filename), tb.tb_lineno, code.co_name])
        tb = tb.tb_next
    return frames[::-1][:limit]
