"""Pipes and outputs (issue 38, items 4 to 6): a reader that goes away ends a command quietly with 141, in
every format; every set of outputs, standard output included, is written all or none; one file named twice
(by two paths, or as ``-`` and ``/dev/stdout``) is refused, and so is an output that is one of the inputs
unless --overwrite-input says it is meant; and a refusal names its real reason."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.output import OutputError, check_outputs
from tests.conftest import RESULTS
from tests.hostile import assert_one_line_exit_2, invoke

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

ROOT = Path(__file__).resolve().parents[2]
SOURCE = RESULTS / "refcount.json"
LARGE = RESULTS / "check.json"  # half a megabyte of JSON: more than a pipe holds
FORMATS = ["table", "json", "junit", "markdown", "openmetrics"]
EXIT_PIPE = 141


def ctxlab(*args: object, stdout, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``python -m ctxlab ARGS`` as a shell runs it, standard output given, standard error captured."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "ctxlab", *map(str, args)], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=cwd, env=env, timeout=300)


def closed_pipe():
    """The write end of a pipe whose reader has already gone: the first write meets EPIPE."""
    r, w = os.pipe()
    os.close(r)
    return w


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp"))


def full_device(path: Path) -> Path:
    """A character device like /dev/full in tmp_path (never the real one: a bug would destroy it)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.stat("/dev/full").st_rdev)
    except OSError as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return path


# ------------------------------------------------------------------ item 4: a reader that goes away

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("output", [[], ["-o", "-"], ["-o", "/dev/stdout"]])
def test_a_closed_pipe_ends_every_format_quietly_with_141(fmt, output):
    w = closed_pipe()
    try:
        done = ctxlab("show", LARGE, "--format", fmt, *output, stdout=w)
    finally:
        os.close(w)
    assert done.returncode == EXIT_PIPE, done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize("command", [["show", LARGE, "--format", "json"],
                                     ["show", LARGE, "-o", "-", "--format", "json"],
                                     ["show", LARGE, "--steps"], ["show", LARGE, "--format", "markdown"]])
def test_head_ends_the_report_quietly_with_141(command):
    """The issue's pipelines: more than a pipe holds, so the write after head left meets EPIPE every time."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    line = " ".join(map(str, [sys.executable, "-m", "ctxlab", *command]))
    done = subprocess.run(["bash", "-c", f"{line} | head -c 20 > /dev/null; echo ${{PIPESTATUS[0]}}"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.stdout.strip() == str(EXIT_PIPE), done.stderr
    assert done.stderr == ""


# ------------------------------------------------------------------ item 5: all or none, standard output too

@pytest.mark.parametrize("command", [["show", SOURCE, "--format", "json"], ["report", "merge", SOURCE]])
def test_a_full_standard_output_leaves_every_file_as_it_was(tmp_path, command):
    kept = tmp_path / "kept.html"
    kept.write_text("kept")
    new = tmp_path / "new.html"
    with open("/dev/full", "w") as full:  # opened for writing only: the device itself is never replaced
        for html in (new, kept):
            done = ctxlab(*command, "--html", html, stdout=full, cwd=tmp_path)
            assert done.returncode == 2, done.stderr
            assert done.stderr.strip() == "Error: cannot write output: -: No space left on device"
    assert not new.exists() and kept.read_text() == "kept"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("command", [["show", LARGE, "--format", "json"], ["report", "merge", LARGE]])
def test_a_reader_gone_leaves_every_file_as_it_was(tmp_path, command):
    new = tmp_path / "new.html"
    w = closed_pipe()
    try:
        done = ctxlab(*command, "--html", new, stdout=w, cwd=tmp_path)
    finally:
        os.close(w)
    assert done.returncode == EXIT_PIPE and done.stderr == "", done.stderr
    assert not new.exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("args, starts", [(["--format", "openmetrics"], "# HELP ctxlab_up"),
                                          (["--format", "json", "-o", "-"], "{"),
                                          (["--format", "junit"], "<?xml")])
def test_a_node_that_cannot_run_writes_its_record_to_standard_output_too(monkeypatch, args, starts):
    from ctxlab.cuda.environment import NoGpu

    def no_gpu(_text):
        raise NoGpu("no NVIDIA driver (test)")

    monkeypatch.setattr("ctxlab.cli.parse_devices", no_gpu)
    result = invoke("check", *args)
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0].startswith(starts) and lines[-1].startswith("Error: no usable GPU"), result.output
    if "openmetrics" in args:
        assert "ctxlab_up 0" in result.output
    assert invoke("check").output.splitlines()[0].startswith("Error: no usable GPU")  # a table: the line alone


def test_check_says_when_its_environment_error_record_was_not_written(tmp_path, monkeypatch):
    from ctxlab.cuda.environment import NoGpu

    def no_gpu(_text):
        raise NoGpu("no NVIDIA driver (test)")

    monkeypatch.setattr("ctxlab.cli.parse_devices", no_gpu)  # the path check takes on a node without a GPU
    full = full_device(tmp_path / "full")
    result = invoke("check", "--openmetrics", full)
    assert_one_line_exit_2(result)
    assert "no usable GPU: no NVIDIA driver (test)" in result.output
    assert "not written" in result.output and f"{full}: No space left on device" in result.output
    written = tmp_path / "node.prom"  # the record that can be written still is, and the line is the usual one
    result = invoke("check", "--openmetrics", written)
    assert_one_line_exit_2(result)
    assert "not written" not in result.output and "ctxlab_up 0" in written.read_text()


# ------------------------------------------------------------------ item 6: one file named twice

@pytest.mark.parametrize("alias", ["/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"])
@pytest.mark.parametrize("stdout", ["pipe", "file"])
def test_standard_output_named_twice_is_refused(tmp_path, alias, stdout):
    if not os.path.exists(alias):
        pytest.skip(f"{alias} does not exist here")
    target = open(tmp_path / "out.txt", "w") if stdout == "file" else subprocess.PIPE
    try:
        done = ctxlab("show", SOURCE, "-o", "-", "--format", "json", "--html", alias, stdout=target)
    finally:
        if stdout == "file":
            target.close()
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "named twice" in done.stderr, done.stderr
    assert not done.stdout and (stdout == "pipe" or (tmp_path / "out.txt").read_text() == "")


def test_dev_null_may_be_standard_output_and_an_output():
    """/dev/null keeps nothing, so nothing interleaves: ``--html /dev/null > /dev/null`` is no mistake."""
    done = ctxlab("show", SOURCE, "--format", "json", "--html", "/dev/null", stdout=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr


ALIASES = ["plain", "dotted", "symlink", "hardlink"]


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.tuples(st.sampled_from(["a", "b", "new"]), st.sampled_from(ALIASES)), min_size=1,
                      max_size=4))
def test_outputs_are_refused_exactly_when_two_name_one_file(picks):
    """Any names for a few files (the path, ./path, a symlink, a hard link): refused iff one file is named twice."""
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        for name in ("a", "b"):
            (base / name).write_text(name)
            os.link(base / name, base / f"{name}.hardlink")
        for name in ("a", "b", "new"):
            os.symlink(base / name, base / f"{name}.symlink")
        names = {"plain": lambda n: str(base / n), "dotted": lambda n: f"{base}/./{n}",
                 "symlink": lambda n: str(base / f"{n}.symlink"),
                 "hardlink": lambda n: str(base / (f"{n}.hardlink" if n != "new" else "new"))}
        paths = [names[alias](name) for name, alias in picks]
        twice = len({name for name, _ in picks}) < len(picks)
        if twice:
            with pytest.raises(OutputError, match="named twice"):
                check_outputs(paths)
        else:
            check_outputs(paths)


# ------------------------------------------------------------------ item 6: an output that is an input

def _inputs(tmp_path: Path) -> dict[str, Path]:
    original = tmp_path / "x.json"
    original.write_bytes(SOURCE.read_bytes())
    os.link(original, tmp_path / "hard.json")
    os.symlink(original, tmp_path / "soft.json")
    return {"same": original, "hardlink": tmp_path / "hard.json", "symlink": tmp_path / "soft.json"}


@pytest.mark.parametrize("how", ["same", "hardlink", "symlink"])
@pytest.mark.parametrize("command", [["show", "{x}", "--format", "json", "-o", "{out}"],
                                     ["show", "{x}", "--html", "{out}"],
                                     ["report", "merge", "{x}", "-o", "{out}"],
                                     ["report", "merge", SOURCE, "{x}", "--markdown", "{out}"],
                                     ["check", "--baseline", "{x}", "--json", "{out}"]])
def test_an_output_that_is_an_input_is_refused(tmp_path, how, command):
    paths = _inputs(tmp_path)
    before = paths["same"].read_bytes()
    args = [str(a).format(x=paths["same"], out=paths[how]) for a in command]
    result = invoke(*args)
    assert_one_line_exit_2(result)
    assert "--overwrite-input" in result.output
    assert paths["same"].read_bytes() == before and leftovers(tmp_path) == []


@pytest.mark.parametrize("command", [["show", "{x}", "--format", "json", "-o", "{x}"],
                                     ["report", "merge", "{x}", "-o", "{x}"]])
def test_overwrite_input_says_it_is_meant(tmp_path, command):
    x = _inputs(tmp_path)["same"]
    inode = x.stat().st_ino
    result = invoke(*[a.format(x=x) for a in command], "--overwrite-input")
    assert result.exit_code == 0, result.output
    assert x.stat().st_ino != inode and leftovers(tmp_path) == []  # replaced, atomically


# ------------------------------------------------------------------ item 6: the real reason

@pytest.mark.skipif(not os.path.isfile("/proc/version"), reason="needs Linux's /proc")
def test_a_file_in_proc_names_the_real_reason():
    result = invoke("show", SOURCE, "-o", "/proc/version")
    assert_one_line_exit_2(result)
    assert "/proc/version" in result.output and "does not exist" not in result.output
