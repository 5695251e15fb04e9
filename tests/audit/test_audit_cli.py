"""``ctxlab audit`` end to end on CPU: the tracer is replaced by one that hands back a recorded stream,
so the exit statuses (3 for an error hazard, the program's own reported apart, 2 for usage), the
outputs, the exception capture and the fork hook are exercised without a GPU."""

import json
import os
import sys

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from tests.audit_events import WORKER, Events
from tests.hostile import assert_one_line_exit_2

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)


def hazard_events():
    ev = Events()
    ev.driver("cuMemAlloc_v2", 100, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=21)
    return ev.events


def audit(*args):
    return CliRunner().invoke(cli, ["audit", *args], catch_exceptions=False)


def test_help_documents_exit_3_every_rule_and_what_rules_cannot_see():
    text = " ".join(audit("--help").output.split())
    assert "Exit status: 3 when a hazard of severity error is found" in text
    assert "The program's own exit status is reported apart" in text
    assert "carries no Python stack" in text and "os.register_at_fork" in text
    for rule in ("no-context", "destroyed-while-current", "primary-released-under-runtime",
                 "reset-with-live-allocations", "cross-context-handle", "fork-after-init", "several-runtime-copies"):
        assert rule in text


@pytest.mark.parametrize("args", [[], ["-c", "pass", "-m", "json"], ["-c", "pass", "--", "x.py"]])
def test_one_program_exactly_or_usage_error(args):
    result = audit(*args)
    assert result.exit_code == 2 and "give exactly one program" in result.output


def test_missing_script_is_one_line_exit_2(fake):
    assert_one_line_exit_2(CliRunner().invoke(cli, ["audit", "--", "no/such/script.py"]))


def test_an_error_hazard_exits_3_and_the_programs_status_is_reported_apart(fake, tmp_path, capfd):
    fake.EVENTS = hazard_events()
    out = tmp_path / "audit.json"
    result = audit("--format", "json", "-o", str(out), "-c", "import sys; print('hi'); sys.exit(5)")
    assert result.exit_code == 3, result.output
    assert "hi" in capfd.readouterr().out and "exited with status 5" in result.output  # the child's own stdout
    doc = json.loads(out.read_text())
    assert doc["exit_status"] == 5 and doc["counts"]["error"] == 1 and doc["findings"][0]["rule"] == "no-context"
    assert doc["ending"]["how"] == "exit" and doc["ending"]["exit_status"] == 5
    assert fake.options["stacks"] is True and "cuMemAlloc_v2" in fake.options["extra_callbacks"]
    assert fake.options["flight"] is True


def test_no_hazard_exits_0_even_when_the_program_failed(fake):
    result = audit("-c", "raise SystemExit(7)")
    assert result.exit_code == 0 and "0 error(s)" in result.output and "exited with status 7" in result.output


def test_warnings_alone_exit_0_and_are_reported(fake, tmp_path):
    from tests.ordering_events import B, Calls

    c = Calls()
    c.stream(B, 1)
    c.event(0xE1)
    c.wait(B, 0xE1)  # a wait on an event never recorded: a warning, no error
    fake.EVENTS = c.events
    out = tmp_path / "audit.json"
    result = audit("--format", "json", "-o", str(out), "-c", "pass")
    doc = json.loads(out.read_text())
    assert doc["counts"]["warning"] == 1 and doc["counts"]["error"] == 0, doc["findings"]
    assert doc["findings"][0]["rule"] == "wait-orders-nothing"
    assert result.exit_code == 0, result.output  # exit 3 is for an error hazard only


def test_an_uncaught_exception_is_kept_with_its_stack(fake, tmp_path):
    out = tmp_path / "a.json"
    result = audit("--format", "json", "-o", str(out), "-c",
                   "def f():\n    raise RuntimeError('CUDA_ERROR_INVALID_HANDLE: invalid resource handle')\nf()")
    assert result.exit_code == 0
    (exc,) = json.loads(out.read_text())["exceptions"]
    assert exc["type"] == "RuntimeError" and exc["stack"][0] == ["<string>", 2, "f"] and exc["cuda"]


@pytest.mark.parametrize("fmt", ["table", "json", "junit", "sarif"])
def test_every_format_goes_to_output_atomically(fake, tmp_path, fmt):
    fake.EVENTS = hazard_events()
    out = tmp_path / f"report.{fmt}"
    out.write_text("old")
    os.chmod(out, 0o640)
    result = audit("--format", fmt, "-o", str(out), "-c", "pass")
    assert result.exit_code == 3 and out.read_text() != "old" and (out.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left behind


def test_unwritable_output_is_refused_before_the_program_runs(fake, tmp_path):
    marker = tmp_path / "ran"
    result = CliRunner().invoke(cli, ["audit", "-o", str(tmp_path / "no" / "dir.json"), "-c",
                                      f"open({str(marker)!r}, 'w')"])
    assert_one_line_exit_2(result)
    assert not marker.exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_fork_hook_reports_the_childs_first_cuda_call(fake, tmp_path, monkeypatch):
    from tests import replay_tracer

    monkeypatch.setenv(replay_tracer.INITIALISED, "1")
    code = ("import os\n"
            "ns = {'__name__': 'cupy.fake'}\n"
            "exec(compile('def arange():\\n    return 1\\n', '<cupy-fake>', 'exec'), ns)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    ns['arange']()\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    out = tmp_path / "fork.json"
    result = audit("--format", "json", "-o", str(out), "-c", code)
    assert result.exit_code == 3, result.output
    doc = json.loads(out.read_text())
    (fork,) = doc["forks"]
    assert fork["parent_initialised"] is True and fork["first_call"]["what"] == "cupy.fake.arange"
    (finding,) = doc["findings"]
    assert finding["rule"] == "fork-after-init" and finding["location"]["line"] == 6
    assert finding["location_from"] == "fork hook" and finding["related"][0]["location"]["line"] == 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_a_fork_before_cuda_is_initialised_is_not_a_hazard(fake, tmp_path):
    code = "import os, json\npid = os.fork()\nif pid == 0:\n    json.dumps(1)\n    os._exit(0)\nos.waitpid(pid, 0)\n"
    out = tmp_path / "fork.json"
    assert audit("--format", "json", "-o", str(out), "-c", code).exit_code == 0
    doc = json.loads(out.read_text())
    assert doc["forks"][0]["parent_initialised"] is False and not doc["findings"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_a_forked_child_that_runs_past_the_program_does_not_write_the_report(fake, tmp_path):
    out = tmp_path / "report.txt"
    code = "import os\npid = os.fork()\nif pid:\n    os.waitpid(pid, 0)\n"
    result = audit("-o", str(out), "-c", code)
    assert result.exit_code == 0
    assert out.read_text().count("audit of") == 1
    assert result.output.count("ctxlab audit:") == 1


def test_import_ctxlab_audit_loads_no_cuda():
    import subprocess

    probe = ("import sys, ctxlab.audit, ctxlab.audit.report, ctxlab.audit.guard, ctxlab.audit.pytest_plugin; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'cuda', 'cupti')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_a_module_and_a_script_with_arguments_run_as_python_runs_them(fake, tmp_path, capfd):
    result = audit("-m", "platform")
    assert result.exit_code == 0 and "exited with status 0" in result.output
    script = tmp_path / "prog.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(int(sys.argv[1]))\n")
    capfd.readouterr()
    result = audit("--", str(script), "4", "x")
    assert result.exit_code == 0 and "exited with status 4" in result.output
    assert "args ['4', 'x']" in capfd.readouterr().out


def test_a_program_that_segfaults_is_audited_with_where_it_crashed(fake, tmp_path):
    fake.EVENTS = hazard_events()
    out = tmp_path / "crash.json"
    code = "import ctypes\ndef crash():\n    ctypes.string_at(0)\ncrash()\n"
    result = audit("--format", "json", "-o", str(out), "-c", code)
    assert result.exit_code == 3, result.output
    assert "died by SIGSEGV while running" in result.output
    doc = json.loads(out.read_text())
    assert doc["ending"]["how"] == "signal" and doc["ending"]["signal"] == "SIGSEGV" and doc["exit_status"] == 139
    crashed = [f for f in doc["findings"] if f["rule"] == "program-crashed"]
    assert len(crashed) == 1 and crashed[0]["location"]["line"] == 3 and crashed[0]["thread"] == "MainThread"
    assert [f["rule"] for f in doc["findings"]].count("no-context") == 1  # what was recorded before is judged


def test_a_program_past_the_time_limit_is_stopped_and_reported(fake, tmp_path):
    out = tmp_path / "hang.json"
    code = "import threading\nlock = threading.Lock()\nlock.acquire()\nlock.acquire()\n"
    result = audit("--format", "json", "--timeout", "2", "-o", str(out), "-c", code)
    assert result.exit_code == 3, result.output
    doc = json.loads(out.read_text())
    assert doc["ending"]["how"] == "timeout" and "ran past the time limit of 2 s" in doc["ending"]["detail"]
    (hung,) = doc["findings"]
    assert hung["rule"] == "program-hung" and hung["location"]["line"] == 4
    assert "no thread was inside a CUDA call" in hung["message"]


def test_os_exit_and_a_fatal_signal_sent_to_itself_are_noted_with_the_line(fake, tmp_path):
    out = tmp_path / "kill.json"
    code = "import os, signal\nx = 1\nos.kill(os.getpid(), signal.SIGKILL)\n"
    assert audit("--format", "json", "-o", str(out), "-c", code).exit_code == 3
    doc = json.loads(out.read_text())
    (crashed,) = doc["findings"]
    assert crashed["rule"] == "program-crashed" and crashed["location"]["line"] == 3
    assert "os.kill" in crashed["message"] and doc["ending"]["signal"] == "SIGKILL"
    out = tmp_path / "exit.json"
    assert audit("--format", "json", "-o", str(out), "-c", "import os\nos._exit(4)\n").exit_code == 0
    doc = json.loads(out.read_text())
    assert doc["ending"] == {**doc["ending"], "how": "exit", "exit_status": 4, "program_ended": False}


def test_the_trace_of_a_program_that_crashes_has_the_calls_up_to_the_crash(fake):
    import ctxlab

    ev = Events()
    ev.driver("cuCtxGetCurrent", 100)
    fake.EVENTS = ev.events
    status, events, stats = ctxlab.api.trace(code="import ctypes; ctypes.string_at(0)")
    assert status == 139 and [e["name"] for e in events] == ["cuCtxGetCurrent"]
    assert stats["ending"]["how"] == "signal" and stats["ending"]["signal"] == "SIGSEGV"


@pytest.mark.parametrize("args, said", [
    (["--", "{bad}"], "bad.py:2: SyntaxError: "),
    (["-c", "def ("], "-c:1: SyntaxError: "),
    (["-m", "no_such_module_for_ctxlab"], "-m no_such_module_for_ctxlab: no module named 'no_such_module_for_ctxlab'"),
    (["--", "{missing}"], "script not found: "),
])
@pytest.mark.parametrize("command", ["audit", "trace"])
def test_the_programs_own_mistakes_are_said_before_any_gpu_work(tmp_path, monkeypatch, command, args, said):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx = (\n")

    def no_gpu_work(*_a, **_k):
        raise AssertionError("the program was started")

    monkeypatch.setattr("ctxlab.audit.run.audit_program", no_gpu_work)
    monkeypatch.setattr("ctxlab.cli.tracing.run_traced", no_gpu_work)
    argv = [a.format(bad=bad, missing=tmp_path / "none.py") for a in args]
    result = CliRunner().invoke(cli, [command, *argv])
    assert_one_line_exit_2(result)
    assert said in result.output and "GPU" not in result.output, result.output


def test_a_module_in_the_working_directory_is_found_as_python_m_finds_it(tmp_path, monkeypatch):
    from ctxlab.cli.program import program_errors

    (tmp_path / "local_tool_for_ctxlab.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    program_errors(None, "local_tool_for_ctxlab", None)  # no error
    program_errors(None, "json.tool", None)
