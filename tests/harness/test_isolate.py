import os

import pytest

from ctxlab.harness.isolate import IsolatedFailure, run_isolated


def test_value_and_environment_come_back_from_a_child():
    out = run_isolated("tests.isolate_targets:answer", 2, y=3, env={"CTXLAB_TEST_VAR": "seen"}, timeout=60)
    assert out["sum"] == 5 and out["env"] == "seen" and out["pid"] != os.getpid()


def test_a_crash_is_reported_with_the_output_tail():
    with pytest.raises(IsolatedFailure) as info:
        run_isolated("tests.isolate_targets:crash", timeout=60)
    assert info.value.kind == "crash"
    assert "signal 11" in info.value.message
    assert "about to crash" in info.value.output


def test_a_hang_is_killed_at_the_timeout():
    with pytest.raises(IsolatedFailure) as info:
        run_isolated("tests.isolate_targets:hang", timeout=1.5)
    assert info.value.kind == "timeout" and "hanging" in info.value.output


def test_an_exception_comes_back_with_its_text():
    with pytest.raises(IsolatedFailure) as info:
        run_isolated("tests.isolate_targets:fail", timeout=60)
    assert info.value.kind == "exception"
    assert "ValueError: bad input in child" in info.value.message


def test_progress_reaches_the_parent():
    seen = []
    done = run_isolated("tests.isolate_targets:progress", timeout=60, on_progress=lambda d, t: seen.append((d, t)))
    assert done == "done"
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_fresh_starts_an_interpreter_that_has_imported_neither_cupy_nor_the_preload():
    fresh = run_isolated("tests.isolate_targets:imported", timeout=60, fresh=True)
    assert fresh == {"cupy": False, "cuda.bindings": False, "ctxlab.harness.preload": False}


def test_the_forkserver_child_has_the_preload_imported():
    assert run_isolated("tests.isolate_targets:imported", timeout=60)["ctxlab.harness.preload"] is True


def test_a_child_reports_its_cpu_time_so_waiting_can_be_told_from_working():
    import time

    spent = []
    started = time.perf_counter()
    assert run_isolated("tests.isolate_targets:spin", 0.4, timeout=60, on_usage=spent.append) == "spun"
    assert run_isolated("tests.isolate_targets:nap", 0.4, timeout=60, on_usage=spent.append) == "slept"
    busy, waiting = spent
    assert busy.cpu >= 0.4 and waiting.cpu < 0.3  # sleeping costs (almost) no CPU; spinning does
    assert started <= busy.entered <= waiting.entered <= time.perf_counter()  # one clock with the parent


def test_a_child_that_raises_still_reports_its_usage():
    spent = []
    with pytest.raises(IsolatedFailure):
        run_isolated("tests.isolate_targets:fail", timeout=60, on_usage=spent.append)
    assert len(spent) == 1 and spent[0].cpu >= 0


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] == "Z"  # a zombie nobody reaped yet is dead
    except FileNotFoundError:
        return True


def test_a_child_killed_at_its_timeout_takes_the_processes_it_started_with_it(tmp_path):
    import time

    pid_file = tmp_path / "grandchild.pid"
    with pytest.raises(IsolatedFailure) as failure:
        run_isolated("tests.isolate_targets:hang_with_grandchild", str(pid_file), timeout=3)
    assert failure.value.kind == "timeout"
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)
