"""Run one function in a child process with a timeout.

Labs that may leave a sticky error (700-class: "the process must be
terminated and relaunched") or reset the primary context run here, so they can
never take the caller down. Children come from a forkserver that imported CuPy
and cuda.bindings before any CUDA call (importing them does not initialise
CUDA), so a child pays neither the imports nor an inherited CUDA state.
"""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import os
import resource
import signal
import tempfile
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

_PRELOAD = ["ctxlab.harness.preload"]
_context = None
_progress_conn = None  # set in a child: where report_progress sends


def report_progress(done: int, total: int) -> None:
    """From code running in a child: tell the parent how far it is (no-op elsewhere)."""
    if _progress_conn is not None:
        try:
            _progress_conn.send((done, total))
        except OSError:
            pass


@dataclasses.dataclass(frozen=True)
class ChildUsage:
    """What a child spent: when it began (``time.perf_counter``, the system-wide monotonic clock on Linux, so
    comparable with the parent's), before importing the target's module, and its own CPU seconds (user +
    system; not those of programs it started in turn)."""

    entered: float
    cpu: float


def usage_since(entered: float) -> ChildUsage:
    """What this process spent so far, for a scenario that began at ``entered``."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return ChildUsage(entered, own.ru_utime + own.ru_stime)


class IsolatedFailure(RuntimeError):
    """The child crashed, hung, or raised; ``kind`` says which, ``output`` is its output tail."""

    def __init__(self, kind: str, message: str, output: str = ""):
        super().__init__(message)
        self.kind, self.message, self.output = kind, message, output

    def to_dict(self) -> dict:
        """The failure as a result's error entry."""
        return {"kind": self.kind, "message": self.message, "output_tail": self.output}


def mp_context(fresh: bool = False):
    """The forkserver (CuPy and cuda.bindings already imported), or with
    ``fresh`` a spawned interpreter that has imported nothing yet."""
    global _context
    if fresh:
        return multiprocessing.get_context("spawn")
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(_PRELOAD)
    return _context


def child_output(log_path: str, env: dict) -> None:
    """In a child: a process group of its own, its output into ``log_path``, ``env`` applied."""
    os.setpgrp()  # a group of its own: a child killed at its timeout takes the processes it started with it
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    for key, value in env.items():  # None unsets: the child then sees the variable absent
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _child(target: str, args: tuple, kwargs: dict, conn, log_path: str, env: dict, progress_conn) -> None:
    global _progress_conn
    entered = time.perf_counter()
    _progress_conn = progress_conn
    child_output(log_path, env)
    try:
        module_name, func_name = target.split(":")
        func = getattr(importlib.import_module(module_name), func_name)
        value = func(*args, **kwargs)
        conn.send(("ok", value, usage_since(entered)))
    except BaseException as exc:  # its text travels: not every exception pickles
        conn.send(("error", "".join(traceback.format_exception(exc)), usage_since(entered)))
    finally:
        conn.close()


def tail(text: str, limit: int = 4000) -> str:
    """The last ``limit`` characters of ``text``."""
    return text if len(text) <= limit else "..." + text[-limit:]


def run_isolated(target: str, *args: Any, timeout: float = 60.0, env: dict | None = None,
                 on_progress: Callable[[int, int], None] | None = None, fresh: bool = False,
                 on_usage: Callable[[ChildUsage], None] | None = None, **kwargs: Any) -> Any:
    """Call ``module:function(*args, **kwargs)`` in a fresh child; return its value.

    ``env`` is set in the child before the target runs (CUDA reads variables
    such as CUDA_MODULE_LOADING when it initialises, which the child has not).
    ``fresh`` starts a new interpreter that has imported nothing (not CuPy, not
    the preload module) instead of a forkserver child. ``on_usage`` receives
    what the child spent, when it answered (``check --profile`` prints it).
    """
    mp = mp_context(fresh)
    fd, log_path = tempfile.mkstemp(prefix="ctxlab-child-", suffix=".log")
    os.close(fd)
    parent, child = mp.Pipe(duplex=False)
    progress_in, progress_out = mp.Pipe(duplex=False)
    process = mp.Process(target=_child, args=(target, args, kwargs, child, log_path, dict(env or {}), progress_out),
                         name=f"ctxlab:{target}", daemon=True)
    try:
        process.start()
        child.close()
        progress_out.close()
        deadline = time.monotonic() + timeout
        message, timed_out = _await_answer(process, parent, progress_in, deadline, on_progress)
        _drain(progress_in, on_progress)
        if message is None and not timed_out:
            process.join(5)  # the pipe closed: the child is dying; let it be reaped
        if message is None and process.is_alive():
            kill_group(process)
            process.join(5)
            raise IsolatedFailure("timeout", f"{target} did not finish within {timeout:g} s", read_tail(log_path))
        process.join(max(1.0, deadline - time.monotonic()))
        if message is None:
            code = process.exitcode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
            raise IsolatedFailure("crash", f"{target} died with {how} before it answered", read_tail(log_path))
        kind, value, usage = message
        if on_usage is not None:
            on_usage(usage)
        if kind == "ok":
            return value
        text = value
        raise IsolatedFailure("exception", text.strip().splitlines()[-1] if text.strip() else "exception",
                              tail(text + "\n" + read_tail(log_path)))
    finally:
        parent.close()
        progress_in.close()
        if process.is_alive():
            kill_group(process)
        Path(log_path).unlink(missing_ok=True)


def kill_group(process) -> None:
    """Kill the child and every process of its group (an interpreter or program it started)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # it had not made its group yet
        process.kill()


def _await_answer(process, answers, progress, deadline: float, on_progress) -> tuple[Any, bool]:
    """The child's message (None if it died first) and whether the deadline passed, passing on progress.

    Reads before joining: a large result would otherwise block the child on a full pipe."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None, True
        ready = wait([answers, progress], min(remaining, 0.5))
        if progress in ready:
            _drain(progress, on_progress)
        try:
            if answers in ready:
                return answers.recv(), False
            if not ready and not process.is_alive() and not answers.poll(0):
                return None, False
        except EOFError:
            return None, False


def _drain(conn, on_progress) -> None:
    """Pass on every progress report waiting in the pipe."""
    try:
        while conn.poll(0):
            done, total = conn.recv()
            if on_progress:
                on_progress(done, total)
    except (EOFError, OSError):
        pass


def read_tail(path: str) -> str:
    """The end of a child's log ('' when it cannot be read)."""
    try:
        return tail(Path(path).read_text(errors="replace"))
    except OSError:
        return ""
