"""What the tracer makes of a thread and its stack: the user's frames of a stack its C side walked or its
stack thread took, the library whose code made the call, a thread's OS name, a status's name."""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from types import FrameType

from ctxlab.tracing.frames import frame_stack, is_user_file, shown


def user_frames(frames: list[tuple[int, int]]) -> tuple[list[list], str | None]:
    """The user's frames of a stack the C side walked, and the library of its innermost frame; each code
    object's reference the C side took is given back."""
    out: list[list] = []
    library = None
    decref = ctypes.pythonapi.Py_DecRef
    decref.argtypes = [ctypes.py_object]
    decref.restype = None
    for address, line in frames:
        if not address:
            continue
        code = ctypes.cast(ctypes.c_void_p(address), ctypes.py_object).value
        if library is None and not out:
            library = library_of(code.co_filename)
        if len(out) < 8 and is_user_file(code.co_filename):
            out.append([shown(code.co_filename), int(line), code.co_name])
        decref(code)
    return out, library


def snapshot(frame: FrameType | None) -> tuple[list[list], str | None]:
    """The user's frames from a thread's current frame (the stack thread's snapshot), and its library."""
    if frame is None:
        return [], None
    return frame_stack(frame), library_of(frame.f_code.co_filename)


IDLE = ("threading.py", "queue.py", "selectors.py", "socket.py", "subprocess.py")


def asking_thread(frames: dict, threads: ThreadNames, exclude: set[int]) -> tuple[list, str | None, str | None]:
    """For a call on a thread Python did not start (a library's worker): the Python thread that was inside
    user code calling a library at that moment, not waiting idle (MainThread first): (its user frames, the
    library it was in, its name); nothing found: ([], None, None)."""
    by_ident = {ident: tid for tid, ident in threads.idents.items()}
    candidates = []
    for ident, frame in frames.items():
        if ident in exclude or frame is None:
            continue
        if frame.f_code.co_filename.endswith(IDLE):
            continue  # waiting on a lock, a queue, a socket: not the one the library works for
        user, library = snapshot(frame)
        if user:
            tid = by_ident.get(ident)
            name = threads.names.get(tid, "?") if tid is not None else "?"
            candidates.append((name != "MainThread", name, user, library))
    if not candidates:
        return [], None, None
    _, name, user, library = min(candidates, key=lambda c: (c[0], c[1]))
    return user, library, name


def library_of(filename: str) -> str | None:
    """The installed package a file belongs to (``torch`` for .../site-packages/torch/cuda/__init__.py)."""
    parts = filename.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            rest = parts[parts.index(marker) + 1:]
            if rest:
                return rest[0].removesuffix(".py")
    return None


def os_thread_name(tid: int) -> str:
    """A thread Python did not start, by its OS name and id (while it lives), else by its id."""
    try:
        with open(f"/proc/self/task/{tid}/comm") as handle:
            return f"{handle.read().strip()} ({tid})"
    except OSError:
        return f"thread {tid}"


def status_name(kind: str, value: int) -> str:
    """A status's name (CUDA_ERROR_INVALID_CONTEXT, cudaErrorInvalidValue), or its number if unknown."""
    try:
        if kind == "driver":
            from cuda.bindings.driver import CUresult

            return CUresult(value).name
        from cuda.bindings.runtime import cudaError_t

        return cudaError_t(value).name
    except Exception:
        return str(value)


class ThreadNames:
    """OS thread id -> the thread's Python name: the threads alive when asked, and each thread started while
    watching, named at its start (a thread that ends keeps its name); others by their OS name."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.idents: dict[int, int] = {}  # OS thread id -> threading ident (sys._current_frames' key)
        self._saved: Callable | None = None

    def refresh(self) -> set[int]:
        """Name the threads alive now; their OS ids."""
        alive = set()
        for t in threading.enumerate():
            if t.native_id is not None:
                alive.add(t.native_id)
                if not isinstance(t, threading._DummyThread):
                    self.names[t.native_id] = t.name
                if t.ident is not None:
                    self.idents[t.native_id] = t.ident
        return alive

    def watch(self, on_name: Callable[[int, int | None, str], None] | None = None) -> None:
        """Name the threads alive, and each thread that starts from now on at its first Python call (telling
        ``on_name(OS thread id, threading ident, name)`` of each, where given)."""
        self.refresh()
        self._saved = saved = threading.getprofile()
        names, idents = self.names, self.idents

        def first_call(frame, event, arg):
            tid, name = threading.get_native_id(), threading.current_thread().name
            names[tid] = name
            idents[tid] = threading.get_ident()
            if on_name is not None:
                on_name(tid, idents[tid], name)
            sys.setprofile(saved)
            return saved(frame, event, arg) if saved is not None else None

        threading.setprofile(first_call)

    def unwatch(self) -> None:
        """Stop naming new threads at their start (the profile hook before watch() is back)."""
        threading.setprofile(self._saved)

    def ident(self, tid: int) -> int | None:
        """The threading ident of an OS thread id (looked up again once if unknown)."""
        if tid not in self.idents:
            self.refresh()
        return self.idents.get(tid)

    def name(self, tid: int) -> str:
        """The thread's name: its Python name, else its OS name and id."""
        name = self.names.get(tid)
        if name is None:
            name = self.names[tid] = os_thread_name(tid)
        return name
