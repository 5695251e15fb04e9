import json

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.model import dumps
from tests.records.test_record import sample


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_every_command_has_help():
    for name, command in cli.commands.items():
        result = invoke(name, "--help")
        assert result.exit_code == 0, name
        first = " ".join(command.help.split("\n")[0].split())
        assert first and first in " ".join(result.output.split())


def test_top_level_help_and_version():
    assert "holds, fails, changed, observed" in invoke("--help").output
    import tomllib
    from pathlib import Path

    version = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["version"]
    assert version in invoke("--version").output  # the package and its metadata agree


@pytest.mark.parametrize("fmt, marker", [("table", "demo.claim"), ("json", '"schema": "ctxlab/1"'),
                                         ("junit", "<testsuites"), ("markdown", "| **holds** |")])
def test_show_renders_a_recorded_file(tmp_path, fmt, marker):
    path = tmp_path / "r.json"
    path.write_text(dumps([sample()]))
    result = invoke("show", str(path), "--format", fmt)
    assert result.exit_code == 0
    assert marker in result.output


def test_show_writes_output_atomically(tmp_path):
    src, dst = tmp_path / "r.json", tmp_path / "out.xml"
    src.write_text(dumps([sample()]))
    assert invoke("show", str(src), "--format", "junit", "--output", str(dst)).exit_code == 0
    assert dst.read_text().startswith("<?xml")


@pytest.mark.parametrize("content, message", [("{broken", "not JSON"), ('{"schema": "other/9"}', "schema")])
def test_show_bad_files_exit_2_without_traceback(tmp_path, content, message):
    path = tmp_path / "r.json"
    path.write_text(content)
    result = invoke("show", str(path))
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_show_missing_file_exits_2(tmp_path):
    result = invoke("show", str(tmp_path / "absent.json"))
    assert result.exit_code == 2 and "cannot read" in result.output


@pytest.mark.parametrize("args", [["--threads", "0"], ["--threads", "-3"], ["--rounds", "0"],
                                  ["--threads", "100000"], ["--context", "purple"], ["--device", "-1"],
                                  ["--timeout", "0"]])
def test_migrate_rejects_bad_options(args):
    result = invoke("migrate", *args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_migrate_refuses_absurd_totals():
    result = invoke("migrate", "--threads", "1024", "--rounds", "1000000")
    assert result.exit_code == 2 and "10,000,000" in result.output


def test_unwritable_output_is_refused_before_running(tmp_path):
    result = invoke("migrate", "--output", str(tmp_path / "no" / "such" / "dir.json"))
    assert result.exit_code == 2 and "cannot write output" in result.output


@pytest.mark.nogpu
@pytest.mark.parametrize("command", [["migrate"], ["refcount"], ["lifecycle"], ["migrate", "--device", "3"],
                                     ["lifecycle", "--trace"]])
def test_gpu_commands_without_gpu_exit_2_with_one_line(command):
    result = invoke(*command)
    assert result.exit_code == 2
    assert result.output.startswith("Error: no usable GPU:")
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.nogpu
def test_doctor_without_gpu_reports_what_it_found_and_what_is_missing():
    result = invoke("doctor", "--format", "json")
    assert result.exit_code == 2
    report = json.loads(result.output)
    assert report["driver"]["ok"] is False
    assert any(line.startswith("driver:") for line in report["missing"])
    assert report["python"]
    table = invoke("doctor")
    assert table.exit_code == 2 and "missing" in table.output


def test_trace_needs_exactly_one_program():
    result = invoke("trace")
    assert result.exit_code == 2 and "exactly one program" in result.output
    result = invoke("trace", "-c", "pass", "-m", "json")
    assert result.exit_code == 2


def test_trace_script_not_found_exits_2(tmp_path):
    result = invoke("trace", "--", str(tmp_path / "missing.py"))
    assert result.exit_code == 2 and "script not found" in result.output


@pytest.mark.nogpu
def test_trace_without_gpu_says_why_and_exits_2():
    result = invoke("trace", "-c", "pass")
    assert result.exit_code == 2 and result.output.startswith("Error:")


def test_after_a_traced_or_audited_program_the_status_is_the_reports_whatever_its_libraries_do_at_exit():
    """On the H200, CuPy crashed in its exit handlers after the audited program released the primary context
    under it, and the audit's status 3 became a segfault: once the report is out, ctxlab ends with its status."""
    import subprocess
    import sys

    program = ("import atexit, os, signal\n"
               "import ctxlab.cli as c\n"
               "atexit.register(lambda: os.kill(os.getpid(), signal.SIGSEGV))  # a library's exit handler\n"
               "def run(**kw):\n"
               "    raise c.ProgramRan(3)\n"
               "c.cli = run\n"
               "c.main()\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
