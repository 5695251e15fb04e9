"""Every exit honest, for every command and subcommand of the Click tree (walked, not listed): its help, the
group's version, and a real run, each with standard output on a full disk (/dev/full), on a pipe whose reader
is gone, and ended by SIGINT at a random instant from its start. Each ends with its status (2 and one line on
standard error for a full disk, 141 and nothing for a reader gone, 130 for SIGINT), never a traceback.

The commands run as the ``ctxlab`` console script runs them (``ctxlab.entry``), in subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxlab.cli import cli
from tests.conftest import RESULTS

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "from ctxlab.entry import main; main()"  # what the console script runs
RESULT = str(RESULTS / "refcount.json")
# the arguments a real run of a command needs (a result file); every other command runs with none
NEEDS = {("show",): [RESULT], ("status",): [RESULT], ("report", "merge"): [RESULT], ("audit",): ["-c", "pass"],
         ("trace",): ["-c", "pass"]}
EXIT_PIPE, EXIT_INTERRUPTED = 141, 130


def command_paths(command: click.Command = cli, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group below ``command``, as its words on the command line."""
    out = [path]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                out += command_paths(sub, (*path, name))
    return out


PATHS = command_paths()
RUNS = ([[*p, "--help"] for p in PATHS] + [["--version"]]
        + [[*p, *NEEDS.get(p, [])] for p in PATHS if p and not isinstance(cli.get_command(click.Context(cli), p[0]),
                                                                         click.Group)])


def start(argv: list[str], stdout) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "COLUMNS": "80"}
    return subprocess.Popen([sys.executable, "-c", ENTRY, *argv], stdout=stdout, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, cwd=ROOT)


def finish(p: subprocess.Popen) -> tuple[int, str]:
    _, err = p.communicate(timeout=120)
    return p.returncode, err.decode(errors="replace")


def run_all(argvs: list[list[str]], opener) -> list[tuple[list[str], int, str]]:
    def one(argv):
        stdout = opener()
        try:
            return argv, *finish(start(argv, stdout))
        finally:
            if hasattr(stdout, "close"):
                stdout.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, argvs))


def test_only_an_interrupt_before_the_first_handler_is_excused():
    early = ('Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
             '  File "/r/ctxlab/entry.py", line 6, in <module>\nKeyboardInterrupt')
    late = early.replace("entry.py\", line 6, in <module>", "entry.py\", line 24, in main") + \
        '\n  File "/r/ctxlab/cli/__init__.py", line 3, in <module>'
    assert before_the_first_handler(early) and not before_the_first_handler(late)
    assert not before_the_first_handler('Traceback ...\nOSError: [Errno 28] No space left on device')


def test_the_tree_is_walked():
    assert ("report", "merge") in PATHS and ("status",) in PATHS and len(PATHS) >= 16


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="/dev/full does not exist here")
def test_a_full_disk_is_one_line_and_status_2_for_every_command():
    broken = []
    for argv, code, err in run_all(RUNS, lambda: open("/dev/full", "w")):
        lines = err.strip().splitlines()
        if code != 2 or len(lines) != 1 or "Traceback" in err:
            broken.append((argv, code, err[-400:]))
    assert not broken, broken


def closed_pipe():
    r, w = os.pipe()
    os.close(r)
    return os.fdopen(w, "w")


def test_a_reader_gone_ends_every_command_quietly_with_141():
    broken = []
    for argv, code, err in run_all(RUNS, closed_pipe):
        if "Traceback" in err:
            broken.append((argv, code, err[-400:]))
        elif code == 2 and len(err.strip().splitlines()) == 1 and "no usable GPU" in err:
            continue  # it stopped before writing anything: no GPU here
        elif code != EXIT_PIPE or err.strip():
            broken.append((argv, code, err[-400:]))
    assert not broken, broken


def before_the_first_handler(err: str) -> bool:
    """Whether a KeyboardInterrupt traceback is from before ctxlab's first signal handler was set: the
    interpreter's own start-up (site, .pth files) or the import of ctxlab's package and entry module, whose
    first statements set them. Any frame of the command line itself (``entry.main`` on) is after."""
    if "KeyboardInterrupt" not in err:
        return False
    frames = [line for line in err.splitlines() if line.strip().startswith('File "')]
    ours = [f for f in frames if "/ctxlab/" in f]
    return all(("/ctxlab/__init__.py" in f or "/ctxlab/version.py" in f or "/ctxlab/entry.py" in f)
               and f.endswith("in <module>") for f in ours)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.sampled_from(RUNS), at=st.floats(0.0, 0.4))
def test_sigint_at_any_instant_ends_with_130_or_the_commands_own_status_and_no_traceback(argv, at):
    p = start(argv, subprocess.DEVNULL)
    time.sleep(at)
    p.send_signal(signal.SIGINT)
    code, err = finish(p)
    if before_the_first_handler(err):
        return  # CPython's default handler was still in place: ctxlab's first line had not run yet
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, (argv, at, err[-600:])
    assert code in (EXIT_INTERRUPTED, -signal.SIGINT, 0, 1, 2, 3), (argv, at, code, err[-300:])
    assert len(err.strip().splitlines()) <= 1, err  # quiet, or the one line the command had said
