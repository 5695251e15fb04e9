"""interop's process scenarios: CUDA after fork, and a child started with each multiprocessing method."""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import time
from typing import Any

from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.outcome import checked, status_name
from ctxlab.labs.common import cuda_recorder, scenario_output
from ctxlab.labs.interop import libs
from ctxlab.labs.interop.claims import START_METHODS
from ctxlab.labs.interop.libs import Missing, init_library, run_main, version_of


def _driver_in_child(device: int) -> dict:
    """Raw driver calls in a forked child: their status names (the parent's init state is not trusted)."""
    from cuda.bindings import driver

    def name(result) -> str:
        status = result[0] if isinstance(result, tuple) else result
        return getattr(status, "name", str(status))

    out: dict[str, Any] = {"cuInit": name(driver.cuInit(0))}
    err, ctx = driver.cuCtxGetCurrent()
    out["cuCtxGetCurrent"], out["current_handle"] = name(err), int(ctx) if int(err) == 0 else None
    dev = driver.CUdevice(device)
    retained = driver.cuDevicePrimaryCtxRetain(dev)
    out["cuDevicePrimaryCtxRetain"] = name(retained)
    alloc = driver.cuMemAlloc(64)
    out["cuMemAlloc"] = name(alloc)
    return out


def _forked_child(device: int, torch_ready: bool, write_fd: int) -> None:
    """In the forked child: the driver, CuPy and (when the parent had it) PyTorch tried, the outcomes written."""
    result: dict = {}
    try:
        result.update(_driver_in_child(device))
    except Exception as exc:
        result["driver_error"] = status_name(exc)[:300]
    try:
        import cupy

        result["cupy"] = checked(lambda: int((cupy.arange(10, dtype=cupy.int64) + 1).sum()), 55)[:300]
    except Exception as exc:
        result["cupy"] = status_name(exc)[:300]
    if torch_ready:
        try:
            import torch

            result["torch"] = checked(lambda: int(torch.ones(10, device=f"cuda:{device}").sum().item()), 10)[:300]
        except Exception as exc:
            result["torch"] = status_name(exc)[:300]
    os.write(write_fd, json.dumps(result).encode())
    os.close(write_fd)


def _wait_child(pid: int, read_fd: int, timeout: float) -> tuple[bytes, str]:
    """The forked child's report and how it ended; it is killed after ``timeout`` seconds."""
    data, deadline = b"", time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return data, f"killed after {timeout:g} s"
        ready, _, _ = select.select([read_fd], [], [], left)
        if ready:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
    _, status = os.waitpid(pid, 0)
    return data, (f"exit status {os.waitstatus_to_exitcode(status)}")


def fork(device: int) -> dict:
    """CUDA initialised in this process (CuPy, then PyTorch if present); then os.fork(): what the child gets."""
    init_driver()
    rec = cuda_recorder("fork")
    libs.require("cupy")
    keep = [init_library("cupy", device)["keep"]]
    torch_reason, torch_skip = None, None
    try:
        libs.require("torch")
        keep.append(init_library("torch", device)["keep"])
    except Missing as why:
        torch_reason, torch_skip = str(why), why.skip
    rec.add("parent", "parent initialised", {"cupy": version_of("cupy"), "torch": version_of("torch"),
                                             "torch_reason": torch_reason, "torch_skip": torch_skip})
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running any of the parent's exit handlers
        code = 0
        try:
            os.close(read_fd)
            _forked_child(device, torch_reason is None, write_fd)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    data, ended = _wait_child(pid, read_fd, 60)
    os.close(read_fd)
    try:
        value = json.loads(data.decode() or "{}")
    except ValueError:
        value = {"driver_error": f"unreadable report: {data[:200]!r}"}
    for key in ("cuInit", "cuCtxGetCurrent", "cuDevicePrimaryCtxRetain", "cuMemAlloc", "cupy"):
        value.setdefault(key, "no answer (" + ended + ")")
    value.setdefault("current_handle", None)
    value.setdefault("torch", None if torch_reason else "no answer (" + ended + ")")
    rec.add("child", "forked child", {**value, "ended": ended, "torch_reason": torch_reason, "torch_skip": torch_skip})
    return scenario_output(rec)


def _mp_child(device: int, conn) -> None:
    """In a multiprocessing child: a CuPy reduction with a known answer, on the parent's device."""
    try:
        import cupy

        def reduction() -> int:
            cupy.cuda.Device(device).use()  # a child starts on device 0 whatever the parent used
            return int((cupy.arange(10, dtype=cupy.int64) + 1).sum())

        conn.send(checked(reduction, 55)[:300])
    except Exception as exc:
        conn.send(status_name(exc)[:300])
    conn.close()


def start_methods_main(device: int) -> dict:
    """Run as a plain (non-daemon) process: CuPy initialised, then a child per start method."""
    import cupy

    cupy.cuda.Device(device).use()
    parent_sum = int((cupy.arange(10, dtype=cupy.int64) + 1).sum())
    methods = {}
    for method in START_METHODS:
        ctx: Any = multiprocessing.get_context(method)
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_mp_child, args=(device, send), name=f"ctxlab-{method}")
        try:
            process.start()
            send.close()
            methods[method] = receive.recv() if receive.poll(30) else "no answer within 30 s"
        except EOFError:
            methods[method] = f"the child ended without answering (exit status {process.exitcode})"
        finally:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join(5)
    return {"parent_sum": parent_sum, "methods": methods}


def start_methods(device: int) -> dict:
    """A fresh non-daemon interpreter initialises CUDA, then starts a child with each multiprocessing method."""
    rec = cuda_recorder("start-methods")
    value, problem = run_main(start_methods_main, device)
    if value is None:
        value = {"methods": {}, "problem": problem}
    rec.add("parent", "start methods", value, context=(None, None))
    return scenario_output(rec)


# ---------------------------------------------------------------- the lab
