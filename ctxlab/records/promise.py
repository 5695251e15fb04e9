"""What a check level promises on a machine, and whether a check kept it (issue 49 item 3: an empty run, or one
that judged fewer claims than its level promises there, is not a healthy run).

A lab's run at check level L promises each claim of the lab whose lowest level is at most L, less those whose
skip the run's own environment record bears out (``skips.borne_out``: fewer GPUs than the lab needs by the GPU
count it records, a library it records as missing or failing, with its import error). Only the labs a check ran
promise anything (``--only``, else every lab), and a claim the node's own software answered is not promised there
(``ANSWERED_HERE``: a feature its driver, runtime or library lacks, a promise whose precondition did not hold). A
run keeps its promise where every promised claim has a verdict other than ``skipped`` or ``unjudged`` (an
``error`` counts as judged: it fails the run by itself). It does not where a promised claim is missing from the
results, is left ``unjudged``, or is ``skipped`` for any other reason the record cannot bear out (an untraced
run, a claim none of whose scenarios was selected, two GPUs without peer access: the run's word alone).

Which claims a lab declares is the catalogue's (``ctxlab.labs``), which this package does not read: ``check``
gives it as ``Declared`` for each lab and GPU it selected (``ctxlab.suite.declared``), so that a lab that
recorded fewer claims than it declares, or a selected lab with no run, is short too. A recorded file read alone
(``ctxlab status``, ``show``) declares what its runs recorded, which a check's run holds whole: the judge gives
every claim a verdict, and one above the level ``unjudged`` with its level, which the run's recorded level must
bear out. A claim whose reason is text alone (files from before skip reasons had a kind) is held to nothing, as
``skips.contradiction`` holds it to nothing: such files read as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ctxlab.records import skips
from ctxlab.records.model import ClaimResult, LabResult, nothing_judged
from ctxlab.records.schema import NOT_JUDGED


@dataclass(frozen=True)
class Declared:
    """What the catalogue declares of one lab's run at a check level: the ids of the claims at or below the level,
    in the lab's order, and the GPUs the lab needs."""

    claims: tuple[str, ...]
    gpus: int = 1


@dataclass(frozen=True)
class Promise:
    """How many claims the runs' levels promised on their machines, how many of those they judged, and each
    promised claim they did not judge, as ``(claim id, why)`` in the order of the runs."""

    promised: int
    judged: int
    missing: tuple[tuple[str, str], ...] = ()


def run_key(run: LabResult) -> tuple[str, object]:
    """The lab and the GPU a run is of, as ``check`` selected them."""
    return run.lab, run.environment.get("device", run.options.get("device", 0))


def _level(run: LabResult) -> int | None:
    level = run.options.get("level")
    return level if isinstance(level, int) and not isinstance(level, bool) else None


# Skips a level does not promise past, though no record bears them out: the claim was asked and this node's own
# software answered that it cannot be (a feature its driver, runtime or library version lacks, as CuPy 14 has no
# deviceReset), or the promise's precondition did not hold, so it promises nothing here. A node is not short of
# its level for what its software cannot be asked; one whose run left claims out, unjudged, untraced or unselected
# is.
ANSWERED_HERE = ("unsupported", "precondition")


def _excused(claim: ClaimResult, run: LabResult, gpus: int | None) -> bool:
    """A recorded claim the run's level does not promise on its machine: above the level (an ``unjudged`` whose
    level the run's recorded one bears out), skipped for a reason the record bears out or that the node's software
    answered (``ANSWERED_HERE``), or not judged for a reason of text alone (an older file, read as before).
    ``gpus``: the GPUs its lab needs (None: those the skip says)."""
    if claim.verdict not in NOT_JUDGED:
        return False
    if claim.skip is None:
        return True
    if claim.verdict == "unjudged":
        return claim.skip.get("kind") == "level" and skips.contradiction(claim.skip, run.environment,
                                                                         run_level=_level(run)) is None
    if claim.skip.get("kind") in ANSWERED_HERE:
        return True
    need = gpus if gpus is not None else claim.skip.get("required")
    return skips.borne_out(claim.skip, run.environment, need if isinstance(need, int) else 1)


def _why(claim: ClaimResult | None) -> str | None:
    """Why a promised claim was not judged; None where it was."""
    if claim is None:
        return "missing from the results"
    if claim.verdict not in NOT_JUDGED:
        return None
    return f"{claim.verdict} ({(claim.skip or {}).get('kind', 'no reason')}): {claim.evidence}"


def _run_promise(run: LabResult, declared: Declared | None) -> Promise:
    recorded = {c.id: c for c in run.claims}
    ids = declared.claims if declared is not None else tuple(recorded)
    gpus = declared.gpus if declared is not None else None
    promised = [i for i in ids if i not in recorded or not _excused(recorded[i], run, gpus)]
    missing = tuple((i, why) for i in promised if (why := _why(recorded.get(i))) is not None)
    return Promise(len(promised), len(promised) - len(missing), missing)


def promise_of(runs: Iterable[LabResult], declared: Mapping[tuple[str, object], Declared] | None = None) -> Promise:
    """What the runs' levels promised on their machines and what they kept. ``declared``: what the catalogue
    declares for each (lab, GPU) the check selected; a selected one with no run promised all its claims, none
    judged. None: each run's recorded claims are its declaration. A node that could not run promises nothing."""
    ran = [run for run in runs if not run.environment_error]
    parts = [_run_promise(run, declared.get(run_key(run)) if declared is not None else None) for run in ran]
    have = {run_key(run) for run in ran}
    for (lab, device), of in (declared or {}).items():
        if (lab, device) not in have:
            parts.append(Promise(len(of.claims), 0, tuple((i, f"lab {lab} has no run on GPU {device}")
                                                          for i in of.claims)))
    return Promise(sum(p.promised for p in parts), sum(p.judged for p in parts),
                   tuple(m for p in parts for m in p.missing))


def unkept(runs: list[LabResult], declared: Mapping[tuple[str, object], Declared] | None = None) -> str | None:
    """Why the runs are not a healthy check though no claim need fail, in one line: nothing judged at all
    (``nothing_judged``), or fewer of the claims their level promises on their machines judged than promised
    (``promise_of``); None where the promise was kept. What ``check``'s exit status, ``ctxlab_failed`` and
    ``ctxlab status`` read."""
    empty = nothing_judged(runs)
    if empty is not None:
        return empty
    promise = promise_of(runs, declared)
    if not promise.missing:
        return None
    (first, why), more = promise.missing[0], len(promise.missing) - 1
    return (f"short of its promise: {promise.judged} of {promise.promised} promised claims judged; not judged: "
            f"{first}" + (f" (+{more} more)" if more else "") + f": {why}")
