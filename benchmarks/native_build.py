"""The native relay (``native_relay.cu``): built with nvcc, run in each of its hand-overs.

Shared by ``handoff_breakdown.py`` and ``relay_vs_native.py``, which compare ctxlab's relay with it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# a condition variable per thread; an atomic turn counter polled with yield; a futex word per thread; the next
# thread woken during the handoff and polling; the cv and the futex with every thread on one core; and the three
# fastest of these with the driver's launch and global lookup (-drv) (native_relay.cu says what each does)
NATIVE_MODES = ("cv", "spin", "futex", "prewake", "cv1", "futex1", "spin-drv", "cv1-drv", "futex1-drv")


def build_native() -> tuple[str | None, str]:
    """The native relay built with nvcc: (path, how), or (None, why not)."""
    nvcc = shutil.which("nvcc") or next(iter(glob.glob("/usr/local/cuda*/bin/nvcc")), None)
    if not nvcc:
        return None, "nvcc not found"
    work = tempfile.mkdtemp(prefix="ctxlab-native-relay-")
    binary = os.path.join(work, "native_relay")
    stubs = os.path.join(os.path.dirname(os.path.dirname(nvcc)), "lib64", "stubs")
    last = ""
    for arch in (["-arch=native"], []):
        for link in (["-lcuda"], [f"-L{stubs}", "-lcuda"]):
            cmd = [nvcc, "-O2", "-std=c++17", *arch, "-o", binary, os.path.join(HERE, "native_relay.cu"), *link]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if done.returncode == 0:  # the command as recorded: nvcc's flags, the source relative to the repository
                return binary, " ".join(["nvcc", "-O2", "-std=c++17", *arch, "benchmarks/native_relay.cu", *link])
            last = done.stderr.strip()[-300:]
    return None, f"nvcc failed: {last}"


def native_rate(binary: str, threads: int, rounds: int, mode: str, kind: str = "primary") -> dict:
    """One run of the native relay: its JSON line (verified handoffs per second and the checks)."""
    done = subprocess.run([binary, str(threads), str(rounds), mode, kind], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"native relay ({threads} threads, {mode}, {kind}) exited {done.returncode}: "
                           f"{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])
