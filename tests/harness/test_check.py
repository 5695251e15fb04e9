import dataclasses

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.model import dumps
from ctxlab.records.shapes import runs_from_document
from ctxlab.report.merge import render_html, render_markdown
from ctxlab.report.summary import summary_markdown
from ctxlab.suite import changes, normalize, run_check
from tests.conftest import recorded
from tests.fake_labs import REGISTRY


def test_a_crashing_and_a_hanging_lab_are_reported_and_the_rest_run():
    lines = []
    runs = run_check(["ok", "crash", "hang", "fails"], [0], timeout=2, jobs=4, progress=lines.append,
                     registry=REGISTRY)
    by = {r.lab: r for r in runs}
    assert [r.lab for r in runs] == ["ok", "crash", "hang", "fails"]  # reported in the order asked
    assert not by["ok"].failed and by["ok"].claims[0].verdict == "holds"
    assert by["crash"].errors[0]["kind"] == "crash" and "about to crash" in by["crash"].errors[0]["output_tail"]
    assert by["hang"].errors[0]["kind"] == "timeout" and "hanging" in by["hang"].errors[0]["output_tail"]
    assert by["crash"].claims[0].verdict == "error"  # its promise was never observed: error, not skipped
    assert by["fails"].failed and by["fails"].claims[0].verdict == "fails"
    assert len(lines) == 4  # one progress line per lab as it ends


def test_a_lab_whose_own_code_breaks_is_an_error_of_that_lab():
    registry = {**REGISTRY, "broken": "tests.fake_labs:DOES_NOT_EXIST"}
    (run,) = run_check(["broken"], [0], registry=registry)
    assert run.failed and run.errors[0]["scenario"] == "lab" and "AttributeError" in run.errors[0]["message"]


def test_a_judge_that_breaks_is_an_error_verdict_and_fails_the_run():
    (run,) = run_check(["broken-judge"], [0], registry=REGISTRY)
    assert run.claims[0].verdict == "error" and "ZeroDivisionError" in run.claims[0].evidence
    assert run.failed and not run.errors  # the experiment ran; the judge broke


def test_undefined_behaviour_scenarios_repeat_and_one_crash_is_an_outcome_not_an_error():
    (run,) = run_check(["flaky"], [0], repeats=3, registry=REGISTRY)
    answered = {o.repeat for o in run.observations if o.what == "seen"}
    broke = [o for o in run.observations if o.what == "repeat broke"]
    assert len(answered) == 2 and len(broke) == 1 and broke[0].value["kind"] == "crash"
    assert answered | {broke[0].repeat} == {0, 1, 2}  # three fresh processes, each tagged with its repeat
    assert not run.errors and run.claims[0].verdict == "holds" and run.claims[0].evidence == "2 observations"


def load(name):
    return runs_from_document(recorded(name), name)


def test_no_drift_against_itself_and_volatile_numbers_are_ignored():
    runs = load("refcount.json")
    assert changes(runs, runs) == []
    assert normalize("handle 0x7f4128000cb0 at 5523.65 handoffs/s") == "handle 0x… at #.# handoffs/s"


def test_drift_lists_changed_verdicts_and_observed_outcomes():
    base = load("refcount.json")
    run = base[0]
    claims = list(run.claims)
    claims[0] = dataclasses.replace(claims[0], verdict="fails")
    observed = next(i for i, c in enumerate(claims) if c.verdict == "observed")
    claims[observed] = dataclasses.replace(claims[observed], evidence="something else happened")
    now = [dataclasses.replace(run, claims=tuple(claims))]
    found = changes(base, now)
    assert {(d["item"], d["change"]) for d in found} == {(claims[0].id, "verdict"),
                                                        (claims[observed].id, "evidence")}
    text = summary_markdown(now, found)
    assert "## Drift against the baseline" in text and claims[0].id in text and "## Failures" in text


def test_drift_in_both_directions_claims_scenarios_and_runs():
    base = load("check.json")
    run = base[0]
    gone, *kept = run.claims
    new = dataclasses.replace(kept[0], id="migrate.a-new-claim")
    timings = {k: v for k, v in run.timings.items() if k != "cross-context"} | {"new-scenario": 1.0}
    now = [dataclasses.replace(run, claims=(*kept, new), timings=timings)]  # and the other labs' runs are gone
    found = {(d["item"], d["change"]) for d in changes(base, now)}
    assert (gone.id, "claim missing") in found and ("migrate.a-new-claim", "new claim") in found
    assert ("cross-context", "scenario missing") in found and ("new-scenario", "new scenario") in found
    assert ("refcount", "run missing") in found
    assert ("refcount", "new run") in {(d["item"], d["change"]) for d in changes(now, base)}


def test_merge_builds_one_matrix_of_claims_against_runners():
    a = load("refcount.json")
    b = [dataclasses.replace(a[0], environment={**a[0].environment, "hostname": "other",
                                                "driver_version": 12080})]
    md = render_markdown([("a.json", a), ("b.json", b)])
    assert md.startswith("## Where the fleet differs")  # two groups (drivers): the fleet view comes first
    header = next(line for line in md.splitlines() if line.startswith("| claim |"))
    assert "driver 13000" in header and "driver 12080" in header
    assert any(line.startswith("| refcount.thread-exit | changed | changed |") for line in md.splitlines())
    assert "<table" in render_html([("a.json", a), ("b.json", b)])


def test_merge_cli(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(dumps(load("refcount.json"), as_list=True))
    result = CliRunner().invoke(cli, ["report", "merge", str(path), "--html", str(tmp_path / "m.html")],
                                catch_exceptions=False)
    assert result.exit_code == 0 and "| refcount.runtime-holds-reference |" in result.output
    assert (tmp_path / "m.html").read_text().startswith("<!doctype html>")


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_check_exit_codes_and_reports(fake_registry, tmp_path):
    ok = invoke("check", "--only", "ok", "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"),
                "--markdown", str(tmp_path / "r.md"))
    assert ok.exit_code == 0, ok.output
    assert runs_from_document(__import__("json").loads((tmp_path / "r.json").read_text()))[0].lab == "ok"
    assert "<testsuites" in (tmp_path / "r.xml").read_text()
    assert "None: no documented claim failed" in (tmp_path / "r.md").read_text()
    bad = invoke("check", "--only", "ok,fails", "--timeout", "5")
    assert bad.exit_code == 1
    crash = invoke("check", "--only", "crash,ok", "--timeout", "5")
    assert crash.exit_code == 1 and "crash on GPU 0" in crash.output


def test_check_fail_on_drift(fake_registry, tmp_path):
    base = tmp_path / "base.json"
    assert invoke("check", "--only", "ok", "--json", str(base)).exit_code == 0
    assert invoke("check", "--only", "ok", "--baseline", str(base), "--fail-on-drift").exit_code == 0
    data = __import__("json").loads(base.read_text())
    data["claims"][0]["verdict"] = "changed"  # one lab run: written as its object, as show writes one run
    base.write_text(__import__("json").dumps(data))
    drifted = invoke("check", "--only", "ok", "--baseline", str(base), "--fail-on-drift")
    assert drifted.exit_code == 1 and "drift: ok.claim on GPU 0: verdict" in drifted.output


@pytest.mark.parametrize("args, message", [(["--only", "nope"], "unknown lab"),
                                           (["--devices", "0,x"], "give 'all' or indices"),
                                           (["--fail-on-drift"], "needs --baseline"),
                                           (["--timeout", "0"], "0")])
def test_check_usage_errors_exit_2(fake_registry, args, message):
    result = invoke("check", *args)
    assert result.exit_code == 2 and message in result.output


@pytest.mark.nogpu
def test_check_without_gpu_exits_2():
    result = invoke("check")
    assert result.exit_code == 2 and "no usable GPU" in result.output


def test_one_pool_runs_gpu_alone_jobs_first_and_never_beside_another():
    from ctxlab.harness.pool import critical_path

    schedule = []
    runs = run_check(["timed", "ok"], [0], jobs=4, registry=REGISTRY, schedule=schedule)
    assert [r.lab for r in runs] == ["timed", "ok"] and not any(r.failed for r in runs)
    assert len(schedule) == 5  # every job of both labs, one pool
    alone = next(s for s in schedule if s.gpu_alone)
    assert alone.started <= min(s.started for s in schedule) + 0.05  # scheduled first
    for other in (s for s in schedule if s is not alone):
        assert other.ended <= alone.started + 0.01 or other.started >= alone.ended - 0.01  # never side by side
    assert critical_path(schedule)[-1].ended == max(s.ended for s in schedule)


def test_a_baseline_orders_the_shared_jobs_longest_first():
    from ctxlab.harness.pool import order
    from ctxlab.harness.runner import plan
    from ctxlab.labs import get_lab

    lab = get_lab("timed", REGISTRY)
    planned = plan(lab, lab.make_options())
    durations = {("timed", "shared-1"): 0.1, ("timed", "shared-2"): 5.0, ("timed", "shared-3"): 1.0}
    assert [s.job.scenario.name for s in order([planned], durations)] == ["alone", "shared-2", "shared-3", "shared-1"]


def test_check_profile_prints_each_job_and_the_critical_path(fake_registry, tmp_path):
    result = invoke("check", "--only", "timed", "--profile", "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert "timed/alone on GPU 0  [GPU alone]" in result.output and "critical path: " in result.output
    assert "GPU-alone jobs" in result.output
    assert "spawn" in result.output and "children's CPU time" in result.output
    row = next(line for line in result.output.splitlines() if "timed/alone on GPU 0" in line)
    assert all(float(cell) >= 0 for cell in row.split()[:5])  # start, end, waited, spawn, cpu: all measured


def test_the_profile_marks_a_child_that_died_before_answering():
    from ctxlab.harness.pool import Scheduled
    from ctxlab.suite import profile_lines

    lines = profile_lines([Scheduled("lab", 0, "a", False, 0.0, 0.0, 1.0, 0.1, 0.5),
                           Scheduled("lab", 0, "b", False, 0.0, 0.0, 2.0)])
    assert lines[2].split()[3:5] == ["-", "-"] and "1 died before answering" in lines[-2]
    assert "0.50 s (50% of their wall time" in lines[-2]


@pytest.mark.parametrize("kwargs, error", [
    ({"names": "ok"}, "OptionError"), ({"names": []}, "OptionError"), ({"names": ["nosuch"]}, "UnknownLab"),
    ({"names": ["ok"], "devices": []}, "OptionError"), ({"names": ["ok"], "timeout": float("nan")}, "OptionError"),
    ({"names": ["ok"], "repeats": 0}, "OptionError"), ({"names": ["ok"], "jobs": 0}, "OptionError")])
def test_the_check_api_refuses_bad_input_before_running_anything(kwargs, error):
    import ctxlab.api

    with pytest.raises(Exception) as raised:
        ctxlab.api.check(registry=REGISTRY, **kwargs)
    assert type(raised.value).__name__ == error


@pytest.mark.nogpu
def test_the_check_api_without_a_gpu_raises_no_gpu_instead_of_returning_errors():
    import ctxlab.api
    from ctxlab.cuda.environment import NoGpu

    with pytest.raises(NoGpu):
        ctxlab.api.check(["refcount"])


def test_check_makes_each_labs_options_once_and_runs_with_them(monkeypatch):
    import ctxlab.api
    from ctxlab.lab import Lab

    made = []
    real = Lab.make_options

    def counted(self, **values):
        made.append((self.name, values["device"]))
        return real(self, **values)

    monkeypatch.setattr(Lab, "make_options", counted)
    (run,) = ctxlab.api.check(["ok"], [0], registry=REGISTRY, repeats=2)
    assert made == [("ok", 0)] and run.options["repeats"] == 2 and not run.failed


def test_one_comparison_one_vocabulary_two_scopes():
    """drift (a baseline against a new run) and the comparison of two runs of one machine are one function:
    every difference is named from CHANGES; a promise's evidence counts only when every claim's is compared;
    which scenarios ran is compared only when asked."""
    import pytest

    from ctxlab.suite import CHANGES

    base = load("check.json")
    run = base[0]
    promise = next(c for c in run.claims if c.kind == "promise")
    observed = next(c for c in run.claims if c.verdict == "observed")
    claims = tuple(dataclasses.replace(c, evidence=c.evidence + " (again)") if c.id in (promise.id, observed.id)
                   else c for c in run.claims)
    timings = {k: v for k, v in list(run.timings.items())[1:]}
    now = [dataclasses.replace(run, claims=claims, timings=timings), *base[1:]]
    drift = changes(base, now)
    every = changes(base, now, evidence="all", scenarios=False)
    assert {d["change"] for d in drift + every} <= set(CHANGES)
    assert {(d["item"], d["change"]) for d in drift} == {(observed.id, "evidence"),
                                                         (next(iter(run.timings)), "scenario missing")}
    assert {(d["item"], d["change"]) for d in every} == {(observed.id, "evidence"), (promise.id, "evidence")}
    with pytest.raises(ValueError, match="evidence must be"):
        changes(base, now, evidence="some")


def test_a_check_that_judged_nothing_is_not_healthy(fake_registry, environment, tmp_path):
    from ctxlab.report.status import status_of

    prom, result = tmp_path / "node.prom", tmp_path / "r.json"
    empty = invoke("check", "--only", "skips", "--openmetrics", str(prom), "--json", str(result))
    assert empty.exit_code == 1, empty.output
    assert "check: nothing judged: all 1 claims of 1 lab run(s) were skipped" in empty.output
    assert "needs 2 GPUs, this machine has 1" in empty.output
    metrics = prom.read_text()
    assert "ctxlab_up 1" in metrics and "ctxlab_failed 1" in metrics and "ctxlab_claims_judged 0" in metrics
    code, line = status_of(str(result))
    assert code == 1 and line.startswith("ctxlab: nothing judged"), line
    environment({"gpu_count": 1})  # the record bears out the two-GPU lab's skip: its claim is not promised here
    both = invoke("check", "--only", "skips,ok")  # one lab judged: a lab skipping (one GPU, peer) is no alarm
    assert both.exit_code == 0 and "nothing judged" not in both.output
    both = invoke("check", "--only", "skips,ok", "--openmetrics", str(prom))
    assert "ctxlab_claims_judged 1" in prom.read_text() and "ctxlab_failed 0" in prom.read_text()
