"""The terminal as it is (issue 38, item 8): any COLUMNS from 20 to 1000 is honoured and nothing is wider
(values above clamp to 1000, non-numbers are ignored), colour is off only for a non-empty NO_COLOR, and a
command group called alone names its commands in one line."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner, Result
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxlab.cli import cli
from ctxlab.report.screen import text_width
from tests.conftest import RESULTS

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

ROOT = RESULTS.parent.parent
CHECK = RESULTS / "check.json"  # a whole check recorded on an H200: every lab, every layout
SGR = re.compile(r"\x1b\[[0-9;]*m")


def show(columns: str | None, *args: str) -> Result:
    env = {"COLUMNS": columns} if columns is not None else {}
    return CliRunner().invoke(cli, ["show", str(CHECK), *args], env=env)


def widest(text: str) -> int:
    return max(text_width(SGR.sub("", line)) for line in text.splitlines())


@settings(max_examples=40, deadline=None)
@given(columns=st.integers(20, 1000), args=st.sampled_from([(), ("--steps",), ("--full",)]))
@example(columns=20, args=())
@example(columns=20, args=("--steps",))
@example(columns=39, args=())  # below the old floor of 40
@example(columns=119, args=("--full",))  # the last stacked width
@example(columns=120, args=("--full",))  # the first wide one
@example(columns=1000, args=("--steps",))
def test_show_fits_every_columns_from_20_to_1000(columns, args):
    result = show(str(columns), *args)
    assert result.exit_code == 0, result.output
    assert widest(result.output) <= columns
    assert "summary:" in result.output


@settings(max_examples=25, deadline=None)
@given(columns=st.integers(20, 300))
@example(columns=20)  # its heading was 25 wide: "137 claims on 2 runner(s)"
@example(columns=24)
def test_report_merge_table_fits_every_columns(columns):
    result = CliRunner().invoke(cli, ["report", "merge", str(CHECK), str(RESULTS / "migrate.json"), "--format",
                                      "table"], env={"COLUMNS": str(columns)})
    assert result.exit_code in (0, 1), result.output
    assert widest(result.output) <= columns
    assert "claims on 2 runner(s)" in " ".join(result.output.split())


def test_columns_above_1000_clamp_to_1000_rather_than_being_ignored():
    thousand = show("1000").output
    assert widest(thousand) > 200  # the layout really is wide: not the 80 columns of an ignored value
    for columns in ("1001", "100000", "9" * 5000):  # int() refuses 5000 digits: never a traceback
        result = show(columns)
        assert result.exit_code == 0 and result.output == thousand, columns


@pytest.mark.parametrize("columns", ["", "abc", "-30", "8O", "1e3", "0", "٣٠", "30.5"])
def test_columns_that_are_not_a_positive_number_are_ignored(columns):
    assert show(columns).output == show(None).output  # a pipe without COLUMNS: 80


def _on_a_terminal(env_change: dict[str, str | None]) -> str:
    """``ctxlab show`` with its standard output on a pseudo-terminal: what the terminal received."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "COLUMNS")}
    env.update({"TERM": "xterm", "COLUMNS": "100", "PYTHONPATH": str(ROOT)})
    env.update({k: v for k, v in env_change.items() if v is not None})
    leader, follower = pty.openpty()
    try:
        child = subprocess.Popen([sys.executable, "-m", "ctxlab", "show", str(RESULTS / "migrate.json")],
                                 stdout=follower, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        os.close(follower)
        received = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child ended and closed the terminal
                break
            if not chunk:
                break
            received += chunk
        assert child.wait(timeout=60) == 0
    finally:
        os.close(leader)
    return received.decode()


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals as Linux has them")
def test_colour_is_off_only_for_a_non_empty_no_color():
    assert "\x1b[" in _on_a_terminal({})
    assert "\x1b[" in _on_a_terminal({"NO_COLOR": ""})  # no-color.org: an empty value leaves colour on
    assert "\x1b[" not in _on_a_terminal({"NO_COLOR": "1"})
    assert "\x1b[" not in _on_a_terminal({"NO_COLOR": "0"})  # any non-empty value, whatever it says
    assert "\x1b[" not in _on_a_terminal({"TERM": "dumb"})


@pytest.mark.parametrize("path", [[], ["report"]])
def test_a_group_alone_names_its_commands_in_one_line(path):
    result = CliRunner().invoke(cli, path)
    assert result.exit_code == 2  # as Click's own usage errors (a missing command among them)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    group = cli if not path else cli.commands[path[0]]
    prog = " ".join(["ctxlab", *path])
    assert lines[0].startswith(f"Error: {prog} needs a command, one of: ")
    assert all(name in lines[0] for name in group.commands), lines[0]  # type: ignore[attr-defined]
    assert lines[0].endswith(f"(try '{prog} --help')")
    helped = CliRunner().invoke(cli, [*path, "--help"])
    assert helped.exit_code == 0 and "Commands:" in helped.output  # --help is still the whole help


def test_a_group_alone_as_the_console_runs_it():
    done = subprocess.run([sys.executable, "-m", "ctxlab", "report"], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "Error: ctxlab report needs a command, one of: merge (try 'ctxlab report --help')\n"


@settings(max_examples=60, deadline=None)
@given(columns=st.integers(20, 1000))
def test_the_doctor_report_fits_any_terminal(columns):
    """ctxlab doctor's components and GPUs (labs/results/doctor.json, an H200's) side by side where they fit,
    stacked where not: no line wider than the screen."""
    import json

    from ctxlab.report.doctor import render_doctor
    from ctxlab.report.screen import Screen, text_width

    report = json.loads((RESULTS / "doctor.json").read_text())
    text = render_doctor(report, Screen(width=columns))
    assert "H200" in text and "driver" in text  # the GPU and the components, side by side or stacked
    assert max(text_width(line) for line in text.splitlines()) <= columns
