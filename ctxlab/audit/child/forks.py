"""Children forked while the audit runs: did CUDA get used in a child forked after initialisation?

``os.register_at_fork(after_in_child=...)`` runs in every child the interpreter forks (``os.fork``,
multiprocessing's ``fork`` start method). There the hook writes one line to the audit's fork log
(the child's pid, the thread and user stack that forked, whether the parent had initialised CUDA:
CUPTI's CU_INIT_FINISHED). If it had, the hook sets a profile function (``sys.setprofile``, in the
child only) that waits for the first call into a CUDA library module (``cupy``, ``cuda.*``,
``torch.cuda``, ``numba.cuda``, ``jax``): it notes that call and the user's stack, probes CUDA there
with ``cuInit`` (in such a child every driver call returns CUDA_ERROR_NOT_INITIALIZED:
``interop.fork.driver``), writes a second line and removes itself. Calls made by other at-fork hooks
(PyTorch registers one) run while ``os.fork`` has not yet returned and are not counted. The parent
reads the log when the program has ended; a child still running then is not seen.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from types import FrameType

from ctxlab.tracing.frames import frame_stack, user_stack

CUDA_MODULES = ("cupy", "cupyx", "cupy_backends", "cuda", "torch.cuda", "numba.cuda", "jax", "jaxlib", "pycuda")


def is_cuda_module(name: str) -> bool:
    """A module of a CUDA library (its first call in a forked child is what fork-after-init reports)."""
    return any(name == p or name.startswith(p + ".") for p in CUDA_MODULES)


class ForkWatch:
    """Installed once per audit (at-fork hooks cannot be removed: ``active`` turns it off)."""

    def __init__(self, path: str, initialised, on_child=None):
        self.path = path
        self.initialised = initialised  # () -> bool: has the parent initialised CUDA?
        self.on_child = on_child  # () -> None: run first in the child (renew locks another thread may hold)
        self.active = False
        self._fork_frame: FrameType | None = None
        self._fork_lasti = -1

    def install(self) -> ForkWatch:
        """Start watching forks (os.register_at_fork); returns itself."""
        self.active = True
        os.register_at_fork(after_in_child=self._in_child)
        return self

    def close(self) -> None:
        """Stop reporting forks (the at-fork hook cannot be unregistered; it becomes inert)."""
        self.active = False

    def _write(self, record: dict) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (json.dumps(record) + "\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    def _in_child(self) -> None:
        if not self.active:
            return
        try:
            self.active = False  # the child's own children are its business
            if self.on_child is not None:
                self.on_child()
            initialised = bool(self.initialised())
            frame = sys._getframe(1)  # the frame that called os.fork (the hook is called from C)
            self._fork_frame, self._fork_lasti = frame, frame.f_lasti
            self._write({"event": "fork", "pid": os.getpid(), "parent": os.getppid(),
                         "thread": threading.current_thread().name, "parent_initialised": initialised,
                         "fork_stack": user_stack(skip=1)})
            if initialised:
                sys.setprofile(self._profile)
        except Exception:
            pass

    def _inside_fork(self, frame) -> bool:
        """Still within os.fork (another at-fork hook running): the forking frame has not moved on."""
        fork = self._fork_frame
        if fork is None or fork.f_lasti != self._fork_lasti:
            return False
        while frame is not None:
            if frame is fork:
                return True
            frame = frame.f_back
        return False

    def _profile(self, frame, event, arg) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__") or ""
            what = f"{module}.{frame.f_code.co_name}"
        elif event == "c_call":
            module = getattr(arg, "__module__", None) or ""
            what = f"{module}.{getattr(arg, '__qualname__', None) or getattr(arg, '__name__', '?')}"
        else:
            return
        if not isinstance(module, str) or not is_cuda_module(module) or self._inside_fork(frame):
            return
        sys.setprofile(None)
        self._fork_frame = None
        self._write({"event": "first_call", "pid": os.getpid(), "what": what, "stack": frame_stack(frame),
                     "cuda_status": probe()})


def probe() -> str:
    """What CUDA says in this process: cuInit's status name."""
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        return str(err.name)
    except Exception as exc:  # no cuda.bindings, no driver library
        return f"not probed: {type(exc).__name__}: {exc}"


def read_log(path: str) -> list[dict]:
    """One record per child: the fork line merged with its first-call line."""
    children: dict = {}
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        child = children.setdefault(record.get("pid"), {"pid": record.get("pid")})
        if record.get("event") == "fork":
            child.update({k: v for k, v in record.items() if k != "event"})
        elif record.get("event") == "first_call":
            child["first_call"] = {"what": record.get("what"), "stack": record.get("stack") or []}
            child["cuda_status"] = record.get("cuda_status")
    return list(children.values())
