"""Evidence is built from observed values (issue 25): what a scenario wrote and the size of the global it loaded
come from its recording. Recordings made before the scenarios recorded them read as before (labs/results)."""

from __future__ import annotations

import dataclasses

import ctxlab
from ctxlab.claim import judge
from ctxlab.labs import modules
from tests.conftest import RESULTS


def _modules_run() -> list:
    (run,) = ctxlab.load(RESULTS / "modules.json")
    return list(run.observations)


def _with(observations: list, what: str, **fields) -> list:
    return [dataclasses.replace(o, value={**o.value, **fields}) if o.what == what else o for o in observations]


def _judged(observations: list) -> dict:
    return {r.id: r for r in judge(modules.CLAIMS, observations, sorted({o.scenario for o in observations}))}


def test_old_recordings_read_the_values_their_scenarios_wrote():
    results = _judged(_modules_run())
    assert "wrote 111 and 222, read back 111 and 222" in results["modules.per-context-instances"].evidence
    assert "grew by 230 MiB or more" in results["modules.module-load-is-immediate"].evidence
    assert "should read 5 after the kernel added 5, the second's 77" in results["modules.library-per-context"].evidence


def test_the_evidence_and_the_verdict_follow_what_was_recorded():
    observations = _with(_modules_run(), "two contexts", wrote_primary=7, wrote_created=8, read_primary=7,
                         read_created=8)
    observations = _with(observations, "library in two contexts", added_a=3, wrote_b=9, read_a=3, read_b=9)
    observations = _with(observations, "load witness", global_mib=200)
    results = _judged(observations)
    per_context = results["modules.per-context-instances"]
    assert per_context.verdict == "holds" and "wrote 7 and 8, read back 7 and 8" in per_context.evidence
    library = results["modules.library-per-context"]
    assert library.verdict == "holds" and "should read 3 after the kernel added 3, the second's 9" in library.evidence
    assert "grew by 180 MiB or more" in results["modules.module-load-is-immediate"].evidence
    # Read back what the other context wrote: the values were not kept apart.
    crossed = _judged(_with(observations, "two contexts", read_primary=8))["modules.per-context-instances"]
    assert crossed.verdict == "fails" and "wrote 7 and 8, read back 8 and 8" in crossed.evidence
