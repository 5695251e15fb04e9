import os
import threading

import pytest

from ctxlab.harness.recorder import Recorder
from ctxlab.harness.threads import (
    Choreography,
    HandoffTimeout,
    Step,
    StepFailed,
    pin_this_thread,
    relay_steps,
    shared_core,
)


def test_steps_run_in_order_each_on_its_named_thread():
    seen = []

    def action(tag):
        def step(baton):
            seen.append((tag, threading.current_thread().name, baton))
            return baton + [tag]
        return step

    steps = [Step("a", "s1", action(1)), Step("b", "s2", action(2)), Step("a", "s3", action(3)),
             Step("c", "s4", action(4))]
    final = Choreography(["a", "b", "c"]).run(steps, [])
    assert final == [1, 2, 3, 4]
    assert seen == [(1, "a", []), (2, "b", [1]), (3, "a", [1, 2]), (4, "c", [1, 2, 3])]


def test_threads_are_the_same_host_threads_across_steps():
    idents = {}

    def step(name):
        def act(baton):
            idents.setdefault(name, set()).add(threading.get_ident())
            return baton
        return act

    steps = [s for r in range(5) for s in (Step("x", "go", step("x")), Step("y", "go", step("y")))]
    Choreography(["x", "y"]).run(steps)
    assert len(idents["x"]) == 1 and len(idents["y"]) == 1 and idents["x"] != idents["y"]


def test_relay_passes_the_baton_round_robin_without_loss():
    names = [f"w{i}" for i in range(8)]
    steps = relay_steps(names, 50, "inc", lambda n: n + 1)
    assert [s.thread for s in steps[:9]] == names + ["w0"]
    assert Choreography(names).run(steps, 0) == 400


def test_recorder_names_the_thread_that_saw_it():
    rec = Recorder(scenario="demo")
    steps = [Step("first", "look", lambda b: rec.add("look", "value", b) and b),
             Step("second", "look", lambda b: rec.add("look", "value", b + 1) and b)]
    Choreography(["first", "second"]).run(steps, 10)
    seen = [(o.thread, o.value, o.scenario) for o in rec.observations]
    assert seen == [("first", 10, "demo"), ("second", 11, "demo")]


def test_a_hung_step_times_out_naming_thread_and_step():
    release = threading.Event()
    steps = [Step("a", "fine", lambda b: b), Step("b", "stuck", lambda b: release.wait(10), round=3)]
    with pytest.raises(HandoffTimeout) as info:
        Choreography(["a", "b"], timeout=0.3).run(steps)
    release.set()
    assert (info.value.thread, info.value.step, info.value.round) == ("b", "stuck", 3)
    assert "thread b did not finish step 'stuck' (round 3)" in str(info.value)


def test_a_failing_step_stops_the_run_with_its_error():
    def boom(_):
        raise KeyError("gone")

    later = []
    steps = [Step("a", "ok", lambda b: b), Step("b", "boom", boom), Step("a", "never", later.append)]
    with pytest.raises(StepFailed) as info:
        Choreography(["a", "b"]).run(steps)
    assert info.value.thread == "b" and info.value.step == "boom"
    assert isinstance(info.value.error, KeyError)
    assert later == []


def test_bad_choreographies_are_refused():
    with pytest.raises(ValueError):
        Choreography([])
    with pytest.raises(ValueError):
        Choreography(["a", "a"])
    with pytest.raises(ValueError, match="do not exist"):
        Choreography(["a"]).run([Step("z", "s", lambda b: b)])


def test_harness_errors_pickle_across_processes():
    import pickle

    t = pickle.loads(pickle.dumps(HandoffTimeout("b", "stuck", 2, 1.5)))
    assert (t.thread, t.step, t.round, t.seconds) == ("b", "stuck", 2, 1.5)
    f = pickle.loads(pickle.dumps(StepFailed("a", "go", None, KeyError("k"))))
    assert (f.thread, f.step) == ("a", "go") and isinstance(f.error, KeyError)


def test_recorder_keeps_values_plain():
    class Handle:  # stands in for cuda.bindings' CUdeviceptr: int() works, pickling does not
        def __int__(self):
            return 0x7000

        def __reduce__(self):
            raise TypeError("no pickling")

    import pickle

    rec = Recorder()
    obs = rec.add("s", "w", {"ptr": Handle(), "list": (1, Handle()), "other": object()})
    assert obs.value["ptr"] == 0x7000 and obs.value["list"] == [1, 0x7000]
    assert obs.value["other"].startswith("<object object")
    pickle.dumps(obs)


def test_exclusive_holders_run_alone_and_shared_ones_together():
    import time

    from ctxlab.harness.gpu_lock import SharedExclusiveLock

    lock = SharedExclusiveLock()
    active, log = [], []
    guard = threading.Lock()

    def work(name, exclusive):
        with lock.hold(exclusive):
            with guard:
                active.append(name)
                log.append(sorted(active))
            time.sleep(0.05)
            with guard:
                active.remove(name)

    threads = [threading.Thread(target=work, args=(f"s{i}", False)) for i in range(4)]
    threads += [threading.Thread(target=work, args=("x", True))]
    threads += [threading.Thread(target=work, args=(f"t{i}", False)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ["x"] in log  # the exclusive holder ran alone
    assert all("x" not in seen or seen == ["x"] for seen in log)
    assert max(len(seen) for seen in log) > 1  # shared holders overlapped


def pinning_works() -> bool:
    """Whether this system lets a thread pin itself (a container may refuse it)."""
    result = []
    thread = threading.Thread(target=lambda: result.append(pin_this_thread(min(os.sched_getaffinity(0)))))
    thread.start()
    thread.join()
    return result == [True]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not pinning_works(),
                    reason="this system has no CPU affinity, or refuses to pin a thread")
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_one_core_runs_every_step_in_order_on_the_one_core(threads):
    names = [f"t{i}" for i in range(threads)]
    seen = []

    def act(baton):
        seen.append((threading.current_thread().name, frozenset(os.sched_getaffinity(0))))
        return baton + 1

    steps = relay_steps(names, 40, "step", act)
    choreo = Choreography(names, one_core=True)
    assert choreo.run(steps, 0) == len(steps)
    assert [name for name, _ in seen] == [s.thread for s in steps]
    assert choreo.core is not None and {cores for _, cores in seen} == {frozenset({choreo.core})}
    assert len(os.sched_getaffinity(0)) >= 1 and choreo.core in os.sched_getaffinity(0)


def test_the_shared_core_is_an_allowed_one_chosen_by_pid(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5, 9}, raising=False)
    chosen = set()
    for pid in range(100, 106):
        monkeypatch.setattr(os, "getpid", lambda pid=pid: pid)
        chosen.add(shared_core())
    assert chosen == {3, 5, 9}  # side-by-side processes spread over the allowed cores, and only those


def test_no_affinity_means_no_shared_core(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert shared_core() is None
    names = ["a", "b"]
    choreo = Choreography(names, one_core=True)
    assert choreo.run(relay_steps(names, 3, "step", lambda b: b + 1), 0) == 6 and choreo.core is None


def test_a_failed_run_does_not_keep_the_core_of_the_run_before(monkeypatch):
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cores: None, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    choreo = Choreography(["a"], one_core=True)
    choreo.run([Step("a", "fine", lambda b: b)])
    assert choreo.core == 0

    def boom(_):
        raise ValueError("no")

    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cores: (_ for _ in ()).throw(OSError(1, "no")))
    with pytest.raises(StepFailed):
        choreo.run([Step("a", "boom", boom)])
    assert choreo.core is None


def test_one_core_where_pinning_is_refused_runs_anyway_and_says_so(monkeypatch):
    def refuse(pid, cores):
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(os, "sched_setaffinity", refuse, raising=False)
    names = ["a", "b"]
    choreo = Choreography(names, one_core=True)
    assert choreo.run(relay_steps(names, 5, "step", lambda b: b + 1), 0) == 10
    assert choreo.core is None


def test_one_core_still_reports_the_step_that_failed():
    def boom(_):
        raise ValueError("no")

    steps = [Step("a", "fine", lambda b: b), Step("b", "boom", boom), Step("a", "never", lambda b: b)]
    with pytest.raises(StepFailed, match="thread b, step 'boom'"):
        Choreography(["a", "b"], one_core=True).run(steps)
