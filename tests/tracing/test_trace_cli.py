"""The trace command's options and the overhead benchmark's command line, without a GPU."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks", "trace_overhead.py")
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_trace_help_names_the_formats_and_what_calls_all_costs():
    result = CliRunner().invoke(cli, ["trace", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "perfetto" in text and "--calls [context|all]" in text
    assert "Every driver and runtime call is recorded either way" in text and "a stack walk per call" in text
    assert "activity" not in text and "Python callback" not in text  # what the code did before the C callback
    assert "--timeout SECONDS" in text and "--stall SECONDS" in text and "crashes or hangs" in text


def test_trace_rejects_an_unknown_selection_or_format():
    assert CliRunner().invoke(cli, ["trace", "--calls", "some", "-c", "pass"]).exit_code == 2
    assert CliRunner().invoke(cli, ["trace", "--format", "svg", "-c", "pass"]).exit_code == 2


@pytest.mark.parametrize("args", [["--launches", "-5"], ["--launches", "0"], ["--repeats", "-1"]])
def test_the_benchmark_rejects_counts_below_one(args):
    done = subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 2 and "at least 1" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.nogpu
def test_the_benchmark_without_a_gpu_says_why_in_one_line():
    done = subprocess.run([sys.executable, BENCH, "--launches", "10"], capture_output=True, text=True, env=ENV,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("trace_overhead: cannot measure here:")


@pytest.mark.nogpu
def test_trace_as_perfetto_without_a_gpu_says_why_and_exits_2(tmp_path):
    result = CliRunner().invoke(cli, ["trace", "--format", "perfetto", "-o", str(tmp_path / "t.json"), "-c", "pass"])
    assert result.exit_code == 2 and result.output.startswith("Error:")
    assert not (tmp_path / "t.json").exists()


def test_the_summary_line_counts_the_records_and_stacks_the_c_callback_kept(monkeypatch, tmp_path):
    """The line on standard error says what the recorded run's stats say (no Python callbacks any more)."""

    from ctxlab.cli import tracing
    from ctxlab.tracing.supervise import Ending
    from tests.conftest import recorded

    doc = recorded("first_context.trace.json")
    stats = {**doc["stats"], "stacks": 7}
    for ending, tail in ((Ending("exit", 3, seconds=0.888), "the program ran 0.888 s"),
                         (Ending("signal", None, "SIGSEGV", 1.5, detail="died by SIGSEGV while running"),
                          "the program ran 1.500 s; the program died by SIGSEGV while running: the calls up to then "
                          "are shown")):
        monkeypatch.setattr("ctxlab.tracing.supervise.trace_supervised",
                            lambda code, module, argv, calls, timeout, stall, e=ending, **_limits: (
                                e.status, doc["events"], stats, e))
        lines: list[str] = []
        status = tracing.run_traced(None, None, ["prog.py"], "context", None, "json", str(tmp_path / "t.json"),
                                    echo=print, err=lines.append)
        assert status == ending.status and json.loads((tmp_path / "t.json").read_text())["stats"] == stats
        (line,) = lines
        assert line == (f"ctxlab trace: {stats['api_calls']} API calls, {stats['resource_events']} resource events "
                        f"({stats['records']} records kept by ctxlab's C callback in its flight recorder, 7 stacks); "
                        f"{tail}")
        assert "Python callbacks" not in line
    assert Ending("signal", None, "SIGSEGV").status == 139
    folded = {**stats, "folded": {"calls": 12345, "by_call": {"cuCtxGetCurrent": 12345}, "tail_kept": 64}}
    monkeypatch.setattr("ctxlab.tracing.supervise.trace_supervised",
                        lambda code, module, argv, calls, timeout, stall, **_limits: (0, doc["events"], folded,
                                                                                      Ending("exit", 0)))
    lines.clear()
    tracing.run_traced(None, None, ["prog.py"], "context", None, "json", str(tmp_path / "t.json"), echo=print,
                       err=lines.append)
    assert lines[0].endswith("; a long recording: 12,345 repeated calls are shown as counts, not calls (each kept "
                             "launch says how many it stands for; the last 64 calls of each thread are all shown)")
