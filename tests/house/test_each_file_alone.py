"""Every test file passes alone, not only after another file has imported what it needs (tests/labs/test_peer_lab.py
passed only after another file had imported ctxlab.labs.peer.scenarios): each file of tests/ runs in a pytest of
its own, several at once."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]  # tests/, whose areas hold the files (tests/gpu/ runs on a GPU)
ROOT = HERE.parent
FILES = sorted(p for p in HERE.glob("*/test_*.py") if p.parent.name != "gpu" and p.name != Path(__file__).name)


# Hypothesis's pytest plugin imports Hypothesis in every pytest it starts (about half of a small file's start, 0.85
# of 1.77 s on a 2-CPU machine); a file that uses Hypothesis imports it itself, and runs its tests the same without it.
WITHOUT = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def run_alone(path: Path) -> tuple[str, int, str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", *WITHOUT, str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return path.name, done.returncode, (done.stdout + done.stderr)[-3000:]


def test_the_list_of_files_is_the_suite():
    assert len(FILES) > 50 and all(p.suffix == ".py" for p in FILES)


@pytest.mark.skipif(os.environ.get("CTXLAB_SKIP_ALONE") == "1", reason="CTXLAB_SKIP_ALONE=1: the files run together")
def test_each_test_file_passes_alone():
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(run_alone, FILES))
    broken = [(name, code, tail) for name, code, tail in results if code not in (0, 5)]  # 5: every test skipped
    assert not broken, "\n\n".join(f"{name} alone exited {code}:\n{tail}" for name, code, tail in broken)
