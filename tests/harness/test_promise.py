"""A check short of what its level promises on the machine is not healthy (issue 49 item 3, ctxlab/records/promise.py):
a promised claim missing from the results, left unjudged, or skipped for a reason the run's own record does not
bear out and the node's software did not answer makes ``ctxlab check`` exit 1 with one line, ``ctxlab_failed 1``
with ``ctxlab_claims_judged`` below ``ctxlab_claims_promised``, ``ctxlab status`` a problem and the table's summary
"Not healthy"; a skip the record bears out, or a feature the node's software lacks, is no alarm, and a lab that was
not selected promises nothing (stand-in labs, no GPU)."""

from __future__ import annotations

from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.promise import promise_of, unkept
from ctxlab.records.shapes import runs_from_document
from ctxlab.report.status import status_of
from tests.conftest import recorded


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def check(tmp_path, *args: str):
    """``ctxlab check ARGS`` writing its metrics and JSON: (the result, the metrics, the JSON's path)."""
    prom, result = tmp_path / "node.prom", tmp_path / "r.json"
    done = invoke("check", *args, "--openmetrics", str(prom), "--json", str(result))
    return done, prom.read_text(), str(result)


def judging(monkeypatch, change):
    """Runs judged by ``change(claims, observations, ran, level, **rest)`` in place of the runner's judge."""
    import ctxlab.harness.runner

    real = ctxlab.harness.runner.judge
    monkeypatch.setattr(ctxlab.harness.runner, "judge", lambda *args, **kwargs: change(real, *args, **kwargs))


def test_a_check_that_judged_what_its_level_promises_is_healthy_and_one_claim_short_is_not(fake_registry,
                                                                                             monkeypatch, tmp_path):
    done, metrics, path = check(tmp_path, "--only", "levelled")
    assert done.exit_code == 0 and "short of its promise" not in done.output, done.output
    assert "No claim fails or is an error, and every scenario ran." in invoke("show", path).output
    assert "ctxlab_claims_promised 3" in metrics and "ctxlab_claims_judged 3" in metrics
    assert "ctxlab_failed 0" in metrics
    # a lab that records fewer claims than it declares: the last one missing from the results
    judging(monkeypatch, lambda real, *args, **kwargs: real(*args, **kwargs)[:-1])
    done, metrics, _ = check(tmp_path, "--only", "levelled")
    assert done.exit_code == 1, done.output
    assert ("check: short of its promise: 2 of 3 promised claims judged; not judged: levelled.observed: missing "
            "from the results\n") in done.output
    assert "ctxlab_claims_promised 3" in metrics and "ctxlab_claims_judged 2" in metrics
    assert "ctxlab_failed 1" in metrics and "ctxlab_up 1" in metrics
    # (ctxlab status reads the file alone, whose runs declare what they recorded: the catalogue is the check's)


def test_a_lower_level_promises_only_its_own_claims(fake_registry, tmp_path):
    """At level 1 the claims above it are unjudged by design (with their level): not promised, no alarm."""
    done, metrics, path = check(tmp_path, "--only", "levelled", "--level", "1")
    assert done.exit_code == 0 and "short of its promise" not in done.output, done.output
    assert "ctxlab_claims_promised 1" in metrics and "ctxlab_claims_judged 1" in metrics
    assert status_of(path)[0] == 0


def test_a_promised_claim_left_unjudged_is_short(fake_registry, monkeypatch, tmp_path):
    # judged as a level 1 run would be, recorded as the level 3 run it was: two promised claims left unjudged
    judging(monkeypatch, lambda real, claims, observations, ran, level, **kwargs: real(claims, observations, ran, 1))
    done, metrics, path = check(tmp_path, "--only", "levelled")
    assert done.exit_code == 1, done.output
    assert ("check: short of its promise: 1 of 3 promised claims judged; not judged: levelled.documented (+1 more): "
            "unjudged (level): not judged at level 1") in done.output
    assert "ctxlab_claims_promised 3" in metrics and "ctxlab_claims_judged 1" in metrics
    assert "ctxlab_failed 1" in metrics
    code, line = status_of(path)
    assert code == 1 and line.startswith("ctxlab: short of its promise: 1 of 3"), line
    shown = invoke("show", path)  # the table's summary says so too, not that all is well
    assert "Not healthy: short of its promise: 1 of 3" in shown.output
    assert "No claim fails or is an error" not in shown.output, shown.output


def test_a_skip_the_record_bears_out_is_not_promised_and_one_it_cannot_is(fake_registry, environment, tmp_path):
    environment({"gpu_count": 1})  # the two-GPU lab on a machine of one: its claim is not promised here
    done, metrics, path = check(tmp_path, "--only", "skips,ok")
    assert done.exit_code == 0 and "short of" not in done.output, done.output
    assert "ctxlab_claims_promised 1" in metrics and "ctxlab_claims_judged 1" in metrics
    assert status_of(path)[0] == 0
    environment({})  # no GPU count recorded: the record cannot bear the skip out
    done, metrics, path = check(tmp_path, "--only", "skips,ok")
    assert done.exit_code == 1 and "not judged: skips.claim: skipped (hardware): only: needs 2 GPUs" in done.output
    assert "ctxlab_claims_promised 2" in metrics and "ctxlab_failed 1" in metrics
    environment({"gpu_count": 1})  # a feature this machine's software lacks: asked and answered, not promised
    done, metrics, path = check(tmp_path, "--only", "skips-unsupported,ok")
    assert done.exit_code == 0 and "ctxlab_claims_promised 1" in metrics, done.output
    assert status_of(path)[0] == 0
    done, metrics, path = check(tmp_path, "--only", "skips-inapplicable,ok")  # could not decide: short
    assert done.exit_code == 1, done.output
    assert ("check: short of its promise: 1 of 2 promised claims judged; not judged: skips-inapplicable.claim: "
            "skipped (inapplicable): only: not traced (stand-in)") in done.output
    code, line = status_of(path)
    assert code == 1 and "short of its promise" in line, line


def test_only_the_selected_labs_promise_and_a_selected_lab_with_no_run_is_short(fake_registry, monkeypatch,
                                                                                tmp_path):
    import ctxlab.api

    done, metrics, _ = check(tmp_path, "--only", "ok")  # the other labs of the catalogue were not asked for
    assert done.exit_code == 0 and "ctxlab_claims_promised 1" in metrics, done.output
    real = ctxlab.api.check
    monkeypatch.setattr(ctxlab.api, "check", lambda *args, **kwargs: [r for r in real(*args, **kwargs)
                                                                      if r.lab != "levelled"])
    done = invoke("check", "--only", "ok,levelled", "--level", "2")
    assert done.exit_code == 1, done.output
    assert ("check: short of its promise: 1 of 3 promised claims judged; not judged: levelled.health (+1 more): "
            "lab levelled has no run on GPU 0") in done.output


def test_recorded_checks_read_as_their_skips_allow():
    """labs/results/check.json's skips are text (recorded before skip reasons had a kind): held to nothing, as
    before. labs/results/h100/check.json, the same check with structured skips, judged the 124 claims level 3
    promises on one GPU: its five skipped as unsupported (CuPy 14 has no deviceReset) and one whose promise's
    precondition did not hold were asked and answered there, and its seven peer claims, a second GPU the record
    shows missing, are not promised either."""
    old = runs_from_document(recorded("check.json"), "check.json")
    assert promise_of(old).promised == promise_of(old).judged == 124
    assert unkept(old) is None
    h100 = runs_from_document(recorded("h100/check.json"), "h100/check.json")
    assert unkept(h100) is None
    promise = promise_of(h100)
    assert (promise.promised, promise.judged) == (124, 124) and promise.missing == ()
