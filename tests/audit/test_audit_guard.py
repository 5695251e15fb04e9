"""The pytest guard's decisions (``ctxlab.audit.guard.judge_test``) on synthetic events, the plugin's
opt-in flag, and the user-stack filter the tracer's callbacks use (CPU only)."""

import os
import subprocess
import sys

import pytest

from ctxlab.audit.guard import Snapshot, judge_test
from ctxlab.audit.model.facts import primary_handles
from ctxlab.tracing.frames import is_user_file, traceback_stack, user_stack
from tests.audit_events import CREATED, PRIMARY, WORKER, Events, guard_plugin_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def created(destroy: bool = False) -> Events:
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=30, context=CREATED, line=12)
    ev.resource("CONTEXT_CREATED", 20, context=CREATED, line=12)
    ev.driver("cuCtxPopCurrent_v2", 40, context=0, line=13)
    if destroy:
        ev.driver("cuCtxDestroy_v2", 50, end=70, context=0, line=14)
        ev.resource("CONTEXT_DESTROY_STARTING", 60, context=CREATED, line=14)
    return ev


def test_a_created_context_not_destroyed_is_a_leak_with_its_stack():
    (p,) = judge_test(created().events, Snapshot(0), Snapshot(0))
    assert p.kind == "context-leak" and f"{CREATED:#x}" in p.message and str(p.stack[0]) == "app.py:12"
    assert "at app.py:12 in main" in p.as_text()


def test_a_created_context_destroyed_in_the_test_passes():
    assert judge_test(created(destroy=True).events, Snapshot(0), Snapshot(0)) == []


def test_the_primary_context_the_runtime_makes_is_no_leak_and_may_stay_current():
    ev = Events()
    ev.primary_runtime()
    assert primary_handles(ev.events) == {PRIMARY}
    assert judge_test(ev.events, Snapshot(0), Snapshot(PRIMARY)) == []
    # bound in an earlier test: known from the session, or read from the driver after the test
    assert judge_test([], Snapshot(0), Snapshot(PRIMARY), known_primary={PRIMARY}) == []
    assert judge_test([], Snapshot(0), Snapshot(PRIMARY, {0: True}, frozenset({PRIMARY}))) == []


def test_leaving_a_created_context_current_fails_naming_the_call():
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=30, context=CREATED, line=12)
    ev.resource("CONTEXT_CREATED", 20, context=CREATED, line=12)
    ev.driver("cuCtxDestroy_v2", 50, end=70, context=CREATED, line=14)
    ev.resource("CONTEXT_DESTROY_STARTING", 60, context=CREATED, line=14)
    (p,) = judge_test(ev.events, Snapshot(0), Snapshot(CREATED))
    assert p.kind == "context-left-current" and "cuCtxCreate_v4" in p.message and str(p.stack[0]) == "app.py:12"


def test_a_primary_context_left_inactive_fails():
    (p,) = judge_test([], Snapshot(0, {0: True, 1: False}), Snapshot(0, {0: False, 1: False}))
    assert p.kind == "primary-deactivated" and "device 0" in p.message


def test_an_error_hazard_fails_the_test_with_the_rule_and_stack():
    ev = Events()
    ev.driver("cuMemAlloc_v2", 100, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=21)
    (p,) = judge_test(ev.events, Snapshot(), Snapshot())
    assert p.kind == "no-context" and str(p.stack[0]) == "app.py:21"
    assert "migrate.driver-call-without-context" in p.message


def test_snapshot_asks_nothing_before_cuda_is_initialised():
    from ctxlab.audit.guard import snapshot

    assert snapshot(False) == Snapshot()
    assert "not asked" in Snapshot().as_text()


def test_the_guard_flag_is_registered_and_opt_in():
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "pytest", *guard_plugin_args(), "--help"], capture_output=True,
                          text=True, env=env, timeout=120, cwd=ROOT)
    assert "--ctxlab-guard" in done.stdout
    with open(os.path.join(ROOT, "pyproject.toml")) as handle:
        assert 'ctxlab_guard = "ctxlab.audit.pytest_plugin"' in handle.read()  # the pytest11 entry point


@pytest.mark.nogpu
def test_the_guard_without_cupti_or_gpu_is_a_usage_error(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *guard_plugin_args(),
                           "--ctxlab-guard", str(tmp_path / "test_x.py")], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 4 and "--ctxlab-guard cannot trace" in done.stderr + done.stdout


# ---------------------------------------------------------------- the user stack

def _through_ctxlab(fn):
    from ctxlab.report.escape import terminal  # a ctxlab frame between the test and the call

    return terminal(fn())


def test_user_stack_keeps_this_file_and_leaves_out_ctxlab_and_the_standard_library():
    stack = user_stack(skip=0)
    assert stack[0][0].endswith("tests/audit/test_audit_guard.py") and stack[0][2].startswith("test_user_stack")
    assert all("site-packages" not in f[0] and "/ctxlab/" not in f[0] for f in stack)


def test_traceback_stack_is_innermost_user_frame_first():
    def boom():
        raise ValueError("x")

    try:
        _through_ctxlab(lambda: boom())
    except ValueError as exc:
        frames = traceback_stack(exc.__traceback__)
    assert [f[2] for f in frames[:2]] == ["boom", "<lambda>"]
    assert all(not f[0].startswith("ctxlab/") for f in frames)


@pytest.mark.parametrize("name,user", [("<string>", True), ("<frozen runpy>", False), ("cupy/_core/core.pyx", False),
                                       (os.path.join(ROOT, "ctxlab", "cli", "__init__.py"), False),
                                       (os.path.join(ROOT, "examples", "first_context.py"), True),
                                       ("/no/such/file.py", False)])
def test_is_user_file(name, user):
    assert is_user_file(name) is user


GUARD_CONFTEST = '''
import ctxlab.audit.guard
import ctxlab.tracing.tracer
from ctxlab.audit.guard import Snapshot


class FakeTracer:
    """Hands back, at each drain, the events the running test emitted."""
    pending = []

    def __init__(self, **kw):
        self.stats = {"callbacks": 0}
        self.cuda_initialised = False

    def __enter__(self):
        return self

    def drain(self):
        out, FakeTracer.pending = FakeTracer.pending, []
        return out

    def close(self):
        pass


def pytest_configure(config):
    ctxlab.tracing.tracer.Tracer = FakeTracer  # where the plugin takes it from
    ctxlab.audit.guard.snapshot = lambda initialised: Snapshot(0)
'''

GUARD_TESTS = '''
import conftest
from tests.audit_events import CREATED, Events


def test_clean():
    pass


def test_leaks():
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=30, context=CREATED, line=12)
    ev.resource("CONTEXT_CREATED", 20, context=CREATED, line=12)
    conftest.FakeTracer.pending = ev.events


def test_fails_and_leaks():
    test_leaks()
    assert False, "its own failure"
'''


def test_the_guard_fails_a_leaking_test_and_keeps_a_failing_tests_own_report(tmp_path):
    (tmp_path / "conftest.py").write_text(GUARD_CONFTEST)
    (tmp_path / "test_sample.py").write_text(GUARD_TESTS)
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *guard_plugin_args(),
                           "--ctxlab-guard", "-rA",
                           "--junitxml", str(tmp_path / "j.xml"), str(tmp_path / "test_sample.py")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "PASSED test_sample.py::test_clean" in out
    # a wrapper around pytest's run of each test: what a test left behind fails its teardown
    assert "ERROR test_sample.py::test_leaks" in out and "PASSED test_sample.py::test_leaks" in out
    assert "FAILED test_sample.py::test_fails_and_leaks" in out and "ERROR test_sample.py::test_fails_and_leaks" in out
    assert "ctxlab guard: context-leak" in out and "at app.py:12 in main" in out
    assert "its own failure" in out  # the test's own failure is kept, the guard's error beside it
    assert "ctxlab guard: 2 test(s) failed the guard" in out
    import xml.etree.ElementTree as ET

    cases = {c.get("name"): c for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    assert cases["test_clean"].find("failure") is None
    assert cases["test_leaks"].find("failure") is None  # its call passed; its teardown is the guard's error
    assert "context-leak" in cases["test_leaks"].find("error").text
    # a test that failed on its own and failed the guard: pytest writes its call and its teardown as two cases
    both = [c for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
            if c.get("name") == "test_fails_and_leaks"]
    failures = [c.find("failure") for c in both if c.find("failure") is not None]
    errors = [c.find("error") for c in both if c.find("error") is not None]
    assert ["its own failure" in (f.text or "") for f in failures] == [True]
    assert ["context-leak" in (f.text or "") for f in errors] == [True]
