"""Signals (issue 38, items 3 and 7): SIGINT ends a command with 130 and SIGTERM with 143, quietly, at any
moment; no temporary file is left, nothing half-written lies under an output's name, and no child process
outlives the command, not even when the command itself is killed outright (SIGKILL).

Each case runs ``python -m ctxlab`` in a process group of its own, as a shell runs a pipeline, and signals it
at random moments (the seed is in every failure message): while it starts, while ``report merge``'s child
processes read a fleet of 60 files, while it renders and while it writes. A run that finished first (0) is
fine too; any other ending is not.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import RESULTS

pytestmark = [pytest.mark.alone,  # run once, alone (tests/house/test_each_file_alone.py)
              pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"),
                                 reason="process groups are read from Linux's /proc")]

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
FILES = 60  # above report.fleet_load.PARALLEL_FROM: child processes read them
WAIT_S = 15.0  # how long an ending may take before it counts as a hang (a bound, not a measurement)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> list[str]:
    """60 runners' result files, made from the recorded check as tests/report/test_fleet_merge.py makes them."""
    folder = tmp_path_factory.mktemp("fleet")
    doc = json.loads((RESULTS / "check.json").read_text())
    paths = []
    for n in range(FILES):
        runs = [{**r, "environment": {**r["environment"], "hostname": f"gpu-{n}"}} for r in doc["runs"]]
        path = folder / f"runner-{n:02d}.json"
        path.write_text(json.dumps({"schema": "ctxlab/1", "runs": runs}))
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    """A result file large enough (about 20 MB) that writing its JSON takes a while: time to be signalled."""
    doc = json.loads((RESULTS / "check.json").read_text())
    path = tmp_path_factory.mktemp("large") / "large.json"
    path.write_text(json.dumps({"schema": "ctxlab/1", "runs": doc["runs"] * 40}))
    return path


def start(args: list[str], folder: Path) -> subprocess.Popen:
    """The command in a session (and process group) of its own; its output to files, never to pipes: a child
    left behind would hold a pipe open and make the test hang instead of fail."""
    with open(folder / "stdout.txt", "w") as out, open(folder / "stderr.txt", "w") as err:
        return subprocess.Popen([sys.executable, "-m", "ctxlab", *args], cwd=folder, env=ENV,
                                start_new_session=True, stdout=out, stderr=err)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[2])


def alive_in_group(pgid: int) -> list[int]:
    """The processes of the group that still run (a zombie has ended: only its parent's wait is missing)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None and found[1] == pgid and found[0] != "Z":
                out.append(int(entry))
    return out


def group_ends(pgid: int) -> bool:
    """Whether every process of the group ends within WAIT_S: os.killpg(pgid, 0) fails, or only zombies are left."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if not alive_in_group(pgid):
            return True
        time.sleep(0.05)
    return False


def _caught(pid: int) -> int:
    """The mask of signals the process has handlers for (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)


def handlers_ready(pid: int) -> None:
    """Wait until the command catches SIGTERM (ctxlab's handlers are in place), or half a second after Python
    catches SIGINT (it runs): a signal before the interpreter runs a line of ctxlab's can only do what Python
    does with it, and a command that never catches SIGTERM must still be signalled while it works."""
    deadline, python_since = time.monotonic() + 10, None
    while time.monotonic() < deadline and process_alive(pid):
        caught = _caught(pid)
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        if caught & (1 << (signal.SIGINT - 1)):
            python_since = python_since or time.monotonic()
            if time.monotonic() - python_since > 0.5:
                return
        time.sleep(0.002)


def process_alive(pid: int) -> bool:
    found = _stat(pid)
    return found is not None and found[0] != "Z"


def readers_started(pgid: int) -> None:
    """Wait (a few seconds at most) until the group has more than the command itself: its readers run."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(alive_in_group(pgid)) < 2:
        time.sleep(0.005)


def ended(process: subprocess.Popen, folder: Path, why: str) -> tuple[int, str]:
    """The command's status and standard error once it ended; everything of its group killed if it hangs."""
    try:
        code = process.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        code = None
    gone = group_ends(process.pid)
    if code is None or not gone:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    stderr = (folder / "stderr.txt").read_text()
    assert code is not None, f"{why}: the command hung; {stderr!r}"
    assert gone, f"{why}: processes of its group outlived it: {alive_in_group(process.pid)}; {stderr!r}"
    return code, stderr


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp"))


def assert_ended_cleanly(code: int, stderr: str, signum: int, folder: Path, output: Path, whole: bytes,
                         why: str) -> None:
    """0 (it finished first) or 128 + the signal, quietly; or the signal's own ending (the shell shows 128 + N for
    it too), which comes only before Python has set its handlers (nothing begun: no report) or once the work was
    done and Python was shutting down (the whole report); nothing left behind either way."""
    assert code in (0, 128 + signum, -signum), f"{why}: status {code}; {stderr!r}"
    assert "Traceback" not in stderr and "Aborted" not in stderr, f"{why}: {stderr!r}"
    if code != 0:  # quiet, but for the line saying where the whole report went when the signal came after it
        done = output.exists() and output.read_bytes() == whole
        assert stderr == "" or (done and stderr.startswith("wrote ") and stderr.count("\n") == 1), \
            f"{why}: {stderr!r}"
    assert leftovers(folder) == [], why
    assert not output.exists() or output.read_bytes() == whole, f"{why}: half a report under {output.name}"
    if code == -signum and output.exists():  # at shutdown: the work was done
        assert output.read_bytes() == whole, f"{why}: killed by the signal before the work was done"


def merge_once(fleet: list[str], folder: Path) -> bytes:
    process = start(["report", "merge", *fleet, "-o", "m.md"], folder)
    code, stderr = ended(process, folder, "uninterrupted")
    assert code == 0, stderr
    whole = (folder / "m.md").read_bytes()
    (folder / "m.md").unlink()
    return whole


@pytest.mark.parametrize("signum, repeats", [(signal.SIGINT, 10), (signal.SIGTERM, 6)])
def test_a_signal_to_the_group_ends_a_merge_cleanly_at_any_moment(tmp_path, fleet, signum, repeats):
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    whole = merge_once(fleet, tmp_path)
    for attempt in range(repeats):
        process = start(["report", "merge", *fleet, "-o", "m.md"], tmp_path)
        handlers_ready(process.pid)
        if attempt % 2:  # every other time while the readers run, else at any moment from the start
            readers_started(process.pid)
            delay = chance.uniform(0, 0.3)
        else:
            delay = chance.uniform(0, 1.5)
        time.sleep(delay)
        why = f"seed {seed}, attempt {attempt}, {signal.Signals(signum).name} after {delay:.3f} s"
        try:
            os.killpg(process.pid, signum)  # as Ctrl-C, or a service manager, signals a whole group
        except ProcessLookupError:
            pass
        code, stderr = ended(process, tmp_path, why)
        assert_ended_cleanly(code, stderr, signum, tmp_path, tmp_path / "m.md", whole, why)
        (tmp_path / "m.md").unlink(missing_ok=True)


def test_sigterm_to_the_merge_alone_ends_its_readers_too(tmp_path, fleet):
    """kill PID (not the group): the readers ignore nothing the parent does not tell them; they must go."""
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    whole = merge_once(fleet, tmp_path)
    for attempt in range(4):
        process = start(["report", "merge", *fleet, "-o", "m.md"], tmp_path)
        handlers_ready(process.pid)
        readers_started(process.pid)
        delay = chance.uniform(0, 0.3)
        time.sleep(delay)
        why = f"seed {seed}, attempt {attempt}, SIGTERM to the parent after {delay:.3f} s"
        process.send_signal(signal.SIGTERM)
        code, stderr = ended(process, tmp_path, why)
        assert_ended_cleanly(code, stderr, signal.SIGTERM, tmp_path, tmp_path / "m.md", whole, why)
        (tmp_path / "m.md").unlink(missing_ok=True)


def test_sigkill_of_the_merge_takes_its_readers_with_it(tmp_path, fleet):
    for attempt in range(3):
        process = start(["report", "merge", *fleet, "-o", "m.md"], tmp_path)
        readers_started(process.pid)
        if len(alive_in_group(process.pid)) < 2:
            pytest.fail(f"attempt {attempt}: the merge's readers never started")
        process.kill()
        process.wait()
        assert group_ends(process.pid), f"attempt {attempt}: readers outlived it: {alive_in_group(process.pid)}"
        assert leftovers(tmp_path) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_show_writes_leaves_no_temporary_file(tmp_path, large, signum):
    """The issue's case: show ... -o out.json signalled while it stages the file."""
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    process = start(["show", str(large), "--format", "json", "-o", "out.json"], tmp_path)
    code, stderr = ended(process, tmp_path, "uninterrupted")
    assert code == 0, stderr
    whole = (tmp_path / "out.json").read_bytes()
    (tmp_path / "out.json").unlink()
    for attempt in range(6):
        process = start(["show", str(large), "--format", "json", "-o", "out.json"], tmp_path)
        handlers_ready(process.pid)
        delay = chance.uniform(0, 1.5)
        time.sleep(delay)
        why = f"seed {seed}, attempt {attempt}, {signal.Signals(signum).name} after {delay:.3f} s"
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            pass
        code, stderr = ended(process, tmp_path, why)
        assert_ended_cleanly(code, stderr, signum, tmp_path, tmp_path / "out.json", whole, why)
        (tmp_path / "out.json").unlink(missing_ok=True)


def test_a_signal_between_two_renames_waits_for_the_second(tmp_path, monkeypatch):
    """All or none holds against a signal too: one that arrives after the first output is renamed into place
    acts once the last one is (in process: the command line's handlers in place, SIGTERM sent to itself)."""
    from ctxlab import output
    from ctxlab.interrupts import Terminated, install, restore

    real = os.replace
    renamed: list[str] = []

    def replace_then_signal(src, dst):
        real(src, dst)
        renamed.append(os.path.basename(dst))
        if len(renamed) == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(output.os, "replace", replace_then_signal)
    former = install()
    try:
        with pytest.raises(Terminated) as ended:
            output.write_outputs([(str(tmp_path / "a.md"), "a"), (str(tmp_path / "b.html"), "b")])
    finally:
        restore(former)
    assert ended.value.code == 143
    assert renamed == ["a.md", "b.html"] and (tmp_path / "b.html").read_text() == "b"
    assert leftovers(tmp_path) == []
