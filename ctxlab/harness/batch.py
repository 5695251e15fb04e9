"""Several scenarios one after another in one child, with a clean-process check between two.

Every child pays for its own primary context, and the driver makes contexts one process at a time
(``benchmarks/context_contention.py``: about 0.37 s a process on an H200, serialised), so scenarios that do
not depend on a fresh process share one (``Isolation.SHARED``). Before each of them but the first, the child
checks that it is as the next one needs it (``cuda_problems``): no thread an earlier scenario started is
still alive, no context but a primary one is current on the child's thread (a library binds its device's
primary context to the thread that starts it), no active primary context carries a sticky error (a
synchronize there returns it), and every GPU's primary context is as the first scenario left it (active or
not, its flags: a scenario may start the libraries and their primary context, never release, reset or
re-flag it). When the check fails, or a scenario crashes or hangs, the child stops and says where; the
runner re-runs that scenario and the rest in fresh children and the result says so.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import device_count
from ctxlab.cuda.errors import CudaError
from ctxlab.harness.isolate import (
    ChildUsage,
    IsolatedFailure,
    child_output,
    kill_group,
    mp_context,
    read_tail,
    tail,
    usage_since,
)

# How long the check lets a scenario's threads finish after the scenario returned (they may be unwinding).
THREAD_GRACE = 2.0


@dataclasses.dataclass(frozen=True)
class Item:
    """One scenario of a batch: ``module:function``, its arguments, its own timeout."""

    target: str
    args: tuple
    kwargs: dict
    timeout: float


@dataclasses.dataclass(frozen=True)
class ItemResult:
    """One scenario that ran in the batch: its value (or exception), when it started and ended."""

    index: int
    out: dict | IsolatedFailure
    started: float  # perf_counter, comparable with the parent's
    ended: float
    usage: ChildUsage | None


@dataclasses.dataclass(frozen=True)
class BatchRun:
    """What a batch child did: the scenarios that ran, and where it stopped early (index, why) if it did."""

    ran: list[ItemResult]
    stopped: tuple[int, str] | None = None


# ---------------------------------------------------------------- in the child

def primary_states() -> dict[int, tuple[bool, int]]:
    """Every GPU's primary context: (active, flags). Reading them never creates a context."""
    return {d: (s.active, s.flags) for d in range(device_count()) for s in (drv.primary_state(d),)}


def primary_handles(states: dict[int, tuple[bool, int]]) -> set[int]:
    """The handles of the active primary contexts (a retain and its release: the count is as it was)."""
    handles = set()
    for device, (active, _flags) in states.items():
        if active:
            handles.add(drv.primary_retain(device))
            drv.primary_release(device)
    return handles


def sticky_error(device: int) -> str | None:
    """The error a synchronize on ``device``'s (active) primary context returns, or None."""
    ctx = drv.primary_retain(device)
    try:
        drv.push(ctx)
        try:
            drv.synchronize()
        except CudaError as exc:
            return str(exc)
        finally:
            drv.pop()
    finally:
        drv.primary_release(device)
    return None


def threads_left(threads_before: set[int | None]) -> list[str]:
    """Names of the threads started since ``threads_before`` still alive after a grace period."""
    deadline = time.monotonic() + THREAD_GRACE
    left = [t for t in threading.enumerate() if t.ident not in threads_before]
    while left and time.monotonic() < deadline:
        left[0].join(max(0.0, deadline - time.monotonic()))
        left = [t for t in left if t.is_alive()]
    return [t.name for t in left]


def cuda_problems(expected: dict[int, tuple[bool, int]] | None) -> tuple[list[str], dict[int, tuple[bool, int]]]:
    """Why CUDA in this process is not as the next shared scenario needs it (empty: it is), and every GPU's
    primary context state now (the first check's becomes what the later ones expect)."""
    found = []
    current = drv.current()
    states = primary_states()
    if not current.none and current.handle not in primary_handles(states):
        found.append(f"a context other than a primary context is current on the child's thread "
                     f"({current.handle:#x})")
    for device, (active, flags) in states.items():
        was = expected.get(device) if expected is not None else None
        if expected is not None and (active, flags) != was:
            found.append(f"GPU {device}'s primary context is {'active' if active else 'inactive'} with flags "
                         f"{flags:#x}; the first scenario left it "
                         + (f"{'active' if was[0] else 'inactive'} with flags {was[1]:#x}" if was else "unknown"))
        if active:
            error = sticky_error(device)
            if error:
                found.append(f"GPU {device}'s primary context has a sticky error: {error}")
    return found, states


def _call(target: str, *args: Any, **kwargs: Any) -> Any:
    module_name, func_name = target.split(":")
    return getattr(importlib.import_module(module_name), func_name)(*args, **kwargs)


def _run_items(items: list[Item], conn, clean_check: str) -> None:
    threads_before = {t.ident for t in threading.enumerate()}
    expected: Any = None
    for index, item in enumerate(items):
        if index:
            try:
                found = [f"thread(s) still running: {', '.join(names)}"] if (names := threads_left(threads_before)) \
                    else []
                more, state = _call(clean_check, expected)
                found += more
                expected = state if expected is None else expected
            except Exception as exc:  # the check itself could not run: the process is not known clean
                found = [f"the check failed: {type(exc).__name__}: {exc}"]
            if found:
                conn.send(("stopped", index, "; ".join(found)))
                return
        conn.send(("begin", index, time.perf_counter()))
        entered, cpu_before = time.perf_counter(), usage_since(0.0).cpu
        try:
            value = _call(item.target, *item.args, **item.kwargs)
            conn.send(("ok", index, value, _spent(entered, cpu_before)))
        except BaseException as exc:  # its text travels: not every exception pickles
            conn.send(("error", index, "".join(traceback.format_exception(exc)), _spent(entered, cpu_before)))
    conn.send(("done",))


def _spent(entered: float, cpu_before: float) -> ChildUsage:
    """This scenario's own CPU seconds: the process's since it began."""
    return ChildUsage(entered, usage_since(entered).cpu - cpu_before)


def _batch_child(items: list[Item], conn, log_path: str, env: dict, clean_check: str) -> None:
    child_output(log_path, env)
    try:
        _run_items(items, conn, clean_check)
    finally:
        conn.close()


# ---------------------------------------------------------------- in the parent

def run_batch(items: list[Item], env: dict | None = None,
              clean_check: str = "ctxlab.harness.batch:cuda_problems") -> BatchRun:
    """Run ``items`` one after another in one forkserver child; stop at a failed check, a crash or a hang.

    ``clean_check`` (``module:function``) is called in the child before each item but the first with what
    its first call returned as the state to expect (None at the first), and returns (problems, state)."""
    mp = mp_context()
    fd, log_path = tempfile.mkstemp(prefix="ctxlab-batch-", suffix=".log")
    os.close(fd)
    parent, child = mp.Pipe(duplex=False)
    process = mp.Process(target=_batch_child, args=(items, child, log_path, dict(env or {}), clean_check),
                         name="ctxlab:batch", daemon=True)
    ran: list[ItemResult] = []
    begun: dict[int, float] = {}
    try:
        process.start()
        child.close()
        index, deadline = 0, time.monotonic() + items[0].timeout if items else 0.0
        while True:
            ready = wait([parent], max(0.0, min(deadline - time.monotonic(), 0.5)))
            if not ready:
                if time.monotonic() < deadline and process.is_alive():
                    continue
                what = "did not finish within" if process.is_alive() else "died before it answered, within"
                return BatchRun(ran, (index, f"{items[index].target} {what} {items[index].timeout:g} s in a "
                                             f"shared child: {tail(read_tail(log_path), 600)}"))
            try:
                message = parent.recv()
            except EOFError:
                process.join(5)
                code = process.exitcode
                how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                return BatchRun(ran, (index, f"the shared child died with {how} during {items[index].target}"))
            kind = message[0]
            if kind == "done":
                return BatchRun(ran)
            if kind == "stopped":
                return BatchRun(ran, (message[1], message[2]))
            if kind == "begin":
                index, begun[message[1]] = message[1], message[2]
                deadline = time.monotonic() + items[index].timeout
                continue
            _kind, at, value, usage = message
            ended = time.perf_counter()
            out: Any = value if kind == "ok" else IsolatedFailure(
                "exception", value.strip().splitlines()[-1] if value.strip() else "exception", tail(value))
            ran.append(ItemResult(at, out, begun.get(at, ended), ended, usage))
            if at + 1 < len(items):
                index, deadline = at + 1, time.monotonic() + items[at + 1].timeout
    finally:
        parent.close()
        if process.is_alive():
            kill_group(process)
        process.join(5)
        Path(log_path).unlink(missing_ok=True)
