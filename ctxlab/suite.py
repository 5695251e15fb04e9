"""``ctxlab check``: every lab on every chosen GPU, isolated, with drift against a baseline.

Each lab's scenarios run in child processes (from the forkserver that preloaded
CuPy and cuda.bindings), each with a timeout, so a lab that crashes, hangs or
leaves a sticky error is reported as that lab's error with its output tail while
the others go on. Every lab's scenarios share one pool (``harness.pool``);
scenarios whose figures need the GPU alone (timings, device memory in use) take
it exclusively through ``harness.gpu_lock``.
"""

from __future__ import annotations

import datetime
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from ctxlab.harness.pool import Scheduled, critical_path, run_plans
from ctxlab.harness.runner import plan
from ctxlab.harness.timing_cache import load_timings, save_timings
from ctxlab.lab import DEFAULT_REPEATS, Lab, LabOptions
from ctxlab.labs import LABS, UnknownLab, get_lab
from ctxlab.levels import FULL
from ctxlab.records.evidence import normalize, normalize_undefined, version_changes
from ctxlab.records.model import LabResult
from ctxlab.records.promise import Declared, run_key


def _error_result(name: str, device: int, exc: BaseException, seconds: float) -> LabResult:
    text = "".join(traceback.format_exception(exc))
    return LabResult(lab=name, started=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                     seconds=seconds, environment={"device": device}, options={"device": device},
                     observations=(), claims=(),
                     errors=({"scenario": "lab", "kind": "exception", "message": f"{type(exc).__name__}: {exc}",
                              "output_tail": text[-4000:]},))


def select_labs(only: str | None, registry: dict[str, str] | None = None) -> list[str] | None:
    """``--only a,b`` as lab names (None: every lab); ``UnknownLab`` (as ``get_lab`` raises for the same mistake)
    naming the unknown ones and the choices."""
    registry = registry or LABS
    if only is None:
        return None
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in registry]
    if unknown or not names:
        raise UnknownLab(f"unknown lab(s) {', '.join(unknown) or repr(only)}: choose from {', '.join(registry)}")
    return names


def progress_line(run: LabResult) -> str:
    """The line printed as each lab ends: its verdict counts, errors and time."""
    from ctxlab.report.text import verdict_counts

    counts = ", ".join(f"{n} {v}" for v, n in sorted(verdict_counts(run).items()))
    errors = f", {len(run.errors)} error(s)" if run.errors else ""
    return f"{run.lab} on GPU {run.options.get('device', '?')}: {counts or 'no claims'}{errors} ({run.seconds:.2f} s)"


def deciding_options(lab: Lab) -> dict[str, Any]:
    """The options under which ``check`` runs ``lab`` (``Lab.check_options``), but those whose instrument is
    missing here: tracing without CUPTI or a C compiler would break every scenario, where untraced only the
    claims that need the trace read skipped, naming what they need."""
    from ctxlab.tracing.missing import trace_missing

    chosen = dict(lab.check_options)
    if chosen.get("trace") and trace_missing() is not None:
        chosen.pop("trace")
    return chosen


def check_options(lab: Lab, device: int, *, timeout: float | None = None, isolation: str = "batched",
                  level: int = FULL, repeats: int | None = None) -> LabOptions:
    """The options ``check`` runs ``lab`` with on ``device``: the lab's deciding options and check's own (the one
    place they are built, for ``ctxlab.check`` and ``run_check`` alike)."""
    return lab.make_options(device=device, scenario_timeout=timeout, isolation=isolation, level=level,
                            **deciding_options(lab), **({"repeats": repeats} if repeats is not None else {}))


def declared(names: list[str] | None, devices: list[int], level: int = FULL,
             registry: dict[str, str] | None = None) -> dict[tuple[str, object], Declared]:
    """What the catalogue declares of each lab ``check`` selected (``names``, None: every lab) on each GPU at
    ``level``: what its run must judge, less skips its record bears out (``ctxlab.records.promise``). A lab not
    selected promises nothing; one whose own code cannot be loaded declares nothing here (its run holds that
    error)."""
    out: dict[tuple[str, object], Declared] = {}
    for name in names or list(registry or LABS):
        try:
            lab = get_lab(name, registry or LABS)
        except Exception:  # reported as that lab's error run
            continue
        ids = tuple(c.id for c in lab.claims if c.lowest_level <= level)
        out.update({(name, device): Declared(ids, lab.gpus) for device in devices})
    return out


def run_check(names: list[str] | None, devices: list[int], timeout: float | None = None, jobs: int | None = None,
              repeats: int | None = None, progress: Callable[[LabResult], None] | None = None,
              registry: dict[str, str] | None = None, baseline: list[LabResult] | None = None,
              schedule: list[Scheduled] | None = None, isolation: str = "batched",
              options: Mapping[str, Mapping[int, LabOptions]] | None = None) -> list[LabResult]:
    """Every lab in ``names`` (default: all) on every GPU in ``devices``, in that order.

    Every scenario of every lab runs in one pool of ``jobs`` child processes at a time (default: the
    cores, at most 8); a ``baseline`` run's timings order them longest first (without one, the timings of the
    last checks on this machine: ``harness.timing_cache``). A lab whose own code breaks becomes a
    result holding that error. ``schedule`` receives when each job ran (``check --profile``). ``options``
    (lab name -> device -> options, as ``ctxlab.api.check`` validated them) are used as given.
    """
    registry = registry or LABS
    plans, broken = [], {}
    for name in names or list(registry):
        for device in devices:
            t = time.perf_counter()
            try:
                lab = get_lab(name, registry)
                chosen = options[name][device] if options else check_options(
                    lab, device, timeout=timeout, isolation=isolation, repeats=repeats or DEFAULT_REPEATS)
                plans.append(plan(lab, chosen))
            except Exception as exc:  # the lab's own code broke: its error, the others go on
                broken[(name, device)] = _error_result(name, device, exc, time.perf_counter() - t)
                if progress:
                    progress(broken[(name, device)])
    if baseline is not None:
        durations = {(r.lab, scenario): seconds for r in baseline for scenario, seconds in r.timings.items()}
    else:  # the last checks on this machine (harness.timing_cache): longest first from the second run on
        durations = load_timings()
    ran = run_plans(plans, width=jobs, durations=durations, on_result=progress, schedule=schedule)
    save_timings(ran)
    by_key = {(r.lab, p.options.device): r for p, r in zip(plans, ran, strict=True)} | broken
    return [by_key[(name, device)] for name in names or list(registry) for device in devices]


def _seconds(value: float | None) -> str:
    return f"{value:7.2f}" if value is not None else f"{'-':>7}"


def profile_lines(schedule: list[Scheduled]) -> list[str]:
    """``check --profile``: every job's start, end, wait, spawn and CPU time, then the critical path and what
    bounds it: a child on the CPU for a small part of its wall time was waiting (the driver, the GPU)."""
    if not schedule:
        return ["profile: no job ran"]
    rows = sorted(schedule, key=lambda s: s.started)
    lines = [f"{'start':>7} {'end':>7} {'waited':>7} {'spawn':>7} {'cpu':>7}  job"]
    lines += [f"{s.started:7.2f} {s.ended:7.2f} {s.waited:7.2f} {_seconds(s.spawn)} {_seconds(s.cpu)}  "
              f"{s.lab}/{s.job} on GPU {s.device}" + ("  [GPU alone]" if s.gpu_alone else "") for s in rows]
    wall = max(s.ended for s in schedule)
    alone = sum(s.ended - s.started for s in schedule if s.gpu_alone)
    busy = sum(s.ended - s.started for s in schedule)
    measured = [s for s in schedule if s.cpu is not None]
    cpu = sum(s.cpu or 0.0 for s in measured)
    spawn = sum(s.spawn or 0.0 for s in measured)
    share = cpu / max(1e-9, sum(s.ended - s.started for s in measured))
    children = len({s.child[0] if s.child else ("own", i) for i, s in enumerate(schedule)})
    shared = sum(1 for s in schedule if s.child)
    lines += ["", f"wall {wall:.2f} s; child processes {children} for {len(schedule)} scenario runs"
                  + (f" ({shared} of them in shared children)" if shared else "") + f", {busy:.2f} s of child time; "
                  f"GPU-alone jobs {alone:.2f} s (they run one at a time with nothing beside them: a floor)",
              f"children's CPU time {cpu:.2f} s ({share:.0%} of their wall time; the rest they waited: the "
              f"driver, the GPU, other processes); starting them {spawn:.2f} s"
              + (f"; {len(schedule) - len(measured)} died before answering" if len(measured) < len(schedule) else ""),
              "critical path: " + " -> ".join(f"{s.lab}/{s.job} ({s.started:.2f}-{s.ended:.2f})"
                                               for s in critical_path(schedule))]
    return lines


# ---------------------------------------------------------------- drift

def _level(run: LabResult) -> int:
    level = run.options.get("level", FULL)  # files before levels: the full check
    return level if isinstance(level, int) and not isinstance(level, bool) else FULL


def level_differences(lower: list[LabResult], full: list[LabResult]) -> list[dict]:
    """Where a run at a lower check level decided otherwise than the full check on the same machine: every
    claim the lower level judged whose verdict differs (evidence differs by design: fewer repeats), and every
    claim it judged that the full check lacks. ``[]`` is the promise each level keeps."""
    by_key = {run_key(r): {c.id: c.verdict for c in r.claims} for r in full}
    out = []
    for run in lower:
        verdicts = by_key.get(run_key(run), {})
        for claim in run.claims:
            if claim.verdict == "unjudged":
                continue
            was = verdicts.get(claim.id)
            if was != claim.verdict:
                out.append({"lab": run.lab, "device": run_key(run)[1], "claim": claim.id, "level": _level(run),
                            "verdict": claim.verdict, "full_check": was or "missing"})
    return out


def _change(run: LabResult, item: str, change: str, **values: str) -> dict:
    return {"lab": run.lab, "device": run_key(run)[1], "item": item, "change": change, **values}


def claims_whose_error_varies(run: LabResult, registry: dict[str, str] | None = None) -> set[str]:
    """The claims of ``run`` whose undefined behaviour meets an error that varies between runs
    (``Claim.error_varies``): their evidence is compared with ``normalize_undefined``."""
    try:
        claims = get_lab(run.lab, registry or LABS).claims
    except Exception:  # a lab this ctxlab does not know (a file from elsewhere): compared as decided
        return set()
    return {c.id for c in claims if c.error_varies}


def decided(run: LabResult, registry: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """Each claim of ``run`` as drift compares it: (verdict, evidence normalised; where the error its undefined
    behaviour meets varies between runs, which error each repeat met blanked too)."""
    undefined = claims_whose_error_varies(run, registry)
    return {c.id: (c.verdict, (normalize_undefined if c.id in undefined else normalize)(c.evidence))
            for c in run.claims}


# The one vocabulary of what differs between two sets of runs (``changes``).
CHANGES = ("run missing", "new run", "scenario missing", "new scenario", "claim missing", "new claim", "verdict",
           "evidence", "version")


def changes(base: list[LabResult], now: list[LabResult], evidence: str = "observed",
            scenarios: bool = True) -> list[dict]:
    """What differs in ``now`` from ``base``, in both directions, one dict per difference: ``{"lab", "device",
    "item", "change"}`` (change one of ``CHANGES``; item the claim, the scenario or the lab) and, where there is
    a before and after, ``"was"`` and ``"now"`` (a changed verdict adds the new ``"evidence"``).

    ``evidence``: whose evidence is compared, as ``decided`` normalises it: ``"observed"`` claims' only (drift:
    a promise's sentence may change with a handle) or ``"all"`` (two runs of one machine). ``scenarios``: also
    which scenarios ran. Between runs of two levels, claims one run's level left ``unjudged`` are not compared,
    nor evidence or scenarios (a lower level runs fewer repeats by design). Sorted by lab, device and item."""
    if evidence not in ("observed", "all"):
        raise ValueError(f"evidence must be 'observed' or 'all', not {evidence!r}")
    before, after = {run_key(r): r for r in base}, {run_key(r): r for r in now}
    out = [_change(r, r.lab, "run missing", was=f"{len(r.claims)} claims") for k, r in before.items() if k not in after]
    out += [_change(r, r.lab, "new run", now=f"{len(r.claims)} claims") for k, r in after.items() if k not in before]
    for key in before.keys() & after.keys():
        old, run = before[key], after[key]
        same_level = _level(old) == _level(run)
        if scenarios and same_level:
            out += [_change(run, name, "scenario missing") for name in old.timings if name not in run.timings]
            out += [_change(run, name, "new scenario") for name in run.timings if name not in old.timings]
        was = {c.id: c for c in old.claims}
        got = {c.id for c in run.claims}
        out += [_change(run, c.id, "claim missing", was=c.verdict) for c in old.claims if c.id not in got]
        then, decided_now = decided(old), decided(run)
        for claim in run.claims:
            prior = was.get(claim.id)
            if prior is None:
                out.append(_change(run, claim.id, "new claim", now=claim.verdict))
            elif "unjudged" in (prior.verdict, claim.verdict) and not same_level:  # one run's level left it out
                continue
            elif prior.verdict != claim.verdict:
                out.append(_change(run, claim.id, "verdict", was=prior.verdict, now=claim.verdict,
                                   evidence=claim.evidence))
            elif ((evidence == "all" or claim.verdict == "observed") and same_level
                  and then[claim.id] != decided_now[claim.id]):
                moved = version_changes(prior.evidence, claim.evidence)
                if moved:  # a library or the driver changed under the claim: named as what it is
                    out.append(_change(run, claim.id, "version", was=", ".join(b for b, _ in moved),
                                       now=", ".join(a for _, a in moved)))
                else:
                    out.append(_change(run, claim.id, "evidence", was=prior.evidence, now=claim.evidence))
    return sorted(out, key=lambda d: (d["lab"], str(d["device"]), d["item"], d["change"]))
