"""Every test file passes alone, not only after another file has imported what it needs (tests/labs/test_peer_lab.py
passed only after another file had imported ctxlab.labs.peer.scenarios): each file of tests/ runs in a pytest of
its own, several at once. The files marked ``alone`` (the heaviest) run here only, not a second time in the same
session (tests/conftest.py: run_alone_only), and start first: the longest jobs first keep the pool busy to the end."""

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
# Two files' pytests per CPU: many of their tests wait (on a child, a signal, a time limit) rather than compute, and
# a waiting file holds a slot of the pool that another file could use.
ALONE_JOBS = 2 * max(1, os.cpu_count() or 1)


def marked_alone(path: Path) -> bool:
    """Whether the file is marked ``alone`` (its only run in a session with this test is here)."""
    return "pytest.mark.alone" in path.read_text()


def run_alone(path: Path) -> tuple[str, int, str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", *WITHOUT, str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return str(path.relative_to(ROOT)), done.returncode, (done.stdout + done.stderr)[-4000:]


def test_the_list_of_files_is_the_suite():
    assert len(FILES) > 50 and all(p.suffix == ".py" for p in FILES)


def test_a_file_marked_alone_runs_only_here_where_this_test_is_in_the_session():
    """The files marked ``alone`` are left out of a session that holds the each-file-alone test (it runs them),
    and kept in one that does not (a developer's run of one file, or CTXLAB_SKIP_ALONE=1)."""
    marked = [p for p in FILES if marked_alone(p)]
    assert marked, "no file is marked alone"
    one = str(marked[0].relative_to(ROOT))

    def collected(*args: str, env: dict | None = None) -> str:
        base = {k: v for k, v in os.environ.items() if k != "CTXLAB_SKIP_ALONE"}  # the caller's own setting aside
        done = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=300, env={**base, **(env or {})})
        return done.stdout

    here = str(Path(__file__).relative_to(ROOT))
    assert one not in collected(one, here) and "deselected" in collected(one, here)
    assert f"{one}::" in collected(one)
    assert f"{one}::" in collected(one, here, env={"CTXLAB_SKIP_ALONE": "1"})
    # the each-file-alone test deselected (-k, --deselect): the files are not left unrun
    assert f"{one}::" in collected(one, here, "-k", "not passes_alone")
    assert f"{one}::" in collected(one, here, "--deselect", f"{here}::test_each_test_file_passes_alone")


@pytest.mark.skipif(os.environ.get("CTXLAB_SKIP_ALONE") == "1", reason="CTXLAB_SKIP_ALONE=1: the files run together")
def test_each_test_file_passes_alone():
    with ThreadPoolExecutor(max_workers=ALONE_JOBS) as pool:
        results = list(pool.map(run_alone, sorted(FILES, key=lambda p: not marked_alone(p))))
    broken = [(name, code, tail) for name, code, tail in results if code not in (0, 5)]  # 5: every test skipped
    assert not broken, "\n\n".join(f"{name} alone exited {code}:\n{tail}" for name, code, tail in broken)
