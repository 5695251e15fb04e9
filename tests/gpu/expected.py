"""What a lab's run must show on every GPU, and the exact verdicts where they were written for its environment.

On any machine (``invariant_problems``): every scenario the run's options select ran (it recorded
observations; one that could not run here recorded why, as a ``skipped`` observation with a structured reason:
one GPU, a library not installed, a driver without green contexts), every claim of the lab's catalogue is in
the run, no claim is ``error`` and no scenario broke, every repeat of an undefined-behaviour scenario answered
(or broke, which is an outcome), a ``skipped`` says why with a structured reason (``ctxlab.records.skips``) that
the run's own environment record does not contradict, and every promise ``holds`` (or is skipped with the
reason): a ``fails`` on a new machine is a finding, and the test fails naming the claim and its evidence. A lab
whose every scenario was skipped passes only for missing hardware or a missing library as the run's environment
record shows them (``missing_here``: its GPU count, its library versions), never on the reason's text.

Exact verdicts (``verdict_problems``) where an expectations file exists for the run's environment: one file per
environment (GPU, driver, runtimes) under ``tests/gpu/expectations/``, named by ``slug``; today's is the
H200's. There an observation claim is compared on its outcome classes too (``outcome_classes``: an error, a
silent wrong value, a correct answer, a crash): every class its evidence shows must be one recorded there (an
error turned into a silent wrong value fails, though both read ``observed``).

On the same GPU under another driver or runtime (``same_gpu``), what does not depend on them is still checked
(``driver_independent_problems``): every claim that file decides is decided (not skipped, unless a library is
missing) and every promise it says holds, holds; old texts and observations, the driver's to change, are
listed in a warning where they differ. Elsewhere the invariants are what is checked, and a warning names the
file to write: ``python -m tests.gpu.expected RUN.json...`` writes it from that machine's runs.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import warnings
from pathlib import Path

import pytest

from ctxlab.records import skips

EXPECTATIONS = Path(__file__).with_name("expectations")
KEY = ("gpu", "driver_version", "runtime_versions")  # runtime-sensitive claims (thread-exit) need all three
H200 = EXPECTATIONS / "nvidia-h200_driver-13000_cuda-bindings-13030_cupy-13020.json"
ALLOWED = {"promise": {"holds", "skipped"}, "old-text": {"holds", "changed", "skipped"},
           "observation": {"observed", "skipped"}}


# ---------------------------------------------------------------- which file

def environment_key(env: dict) -> dict:
    """What an expectations file is written for: the GPU, the driver and the runtimes' versions."""
    return {key: env.get(key) for key in KEY}


def slug(env: dict) -> str:
    """The expectations file's name (without .json) for an environment: ``nvidia-h200_driver-13000_cupy-13020``."""
    key = environment_key(env)
    gpu = re.sub(r"[^a-z0-9]+", "-", str(key["gpu"]).lower()).strip("-")
    runtimes = "_".join(f"{re.sub(r'[^a-z0-9]+', '-', name.lower())}-{version}"
                        for name, version in sorted((key["runtime_versions"] or {}).items()))
    return "_".join(part for part in (gpu, f"driver-{key['driver_version']}", runtimes) if part)


def files() -> list[Path]:
    """Every expectations file."""
    return sorted(EXPECTATIONS.glob("*.json"))


def expectations(path: Path = H200) -> dict:
    """One expectations file (default: the H200's, the machine labs/results was recorded on)."""
    return json.loads(Path(path).read_text())


def expectations_for(env: dict) -> dict | None:
    """The expectations written for this environment, or None where none were."""
    path = EXPECTATIONS / f"{slug(env)}.json"
    if not path.exists():
        return None
    table = expectations(path)
    assert environment_key(table["written_for"]) == environment_key(env), \
        f"{path.name} is named for {slug(env)} but written for {environment_key(table['written_for'])}"
    return table


def same_gpu(env: dict) -> dict | None:
    """An expectations file written for this environment's GPU under another driver or runtimes, or None."""
    for path in files():
        table = expectations(path)
        if table["written_for"].get("gpu") == env.get("gpu"):
            return table
    return None


# ---------------------------------------------------------------- what an observation's evidence shows

_CLASSES = {
    "error": re.compile(r"\bCUDA_ERROR_[A-Z_]+|\bcudaError[A-Za-z]+"),
    "silent-wrong": re.compile(r"silent-wrong-result|wrong values returned without an error: [1-9]"),
    "correct": re.compile(r"\bcorrect\b"),
    "crash": re.compile(r"\bcrash|\bSIG[A-Z]{3,}\b|died with"),
}


def outcome_classes(evidence: str) -> list[str]:
    """The outcome classes an observation claim's evidence shows: error, silent-wrong, correct, crash."""
    return sorted(name for name, pattern in _CLASSES.items() if pattern.search(evidence or ""))


def outcome_problems(run, table: dict) -> list[str]:
    """Observation claims showing an outcome class never recorded for them on the table's environment."""
    allowed = table.get("outcomes", {})
    out = []
    for claim in run.claims:
        if claim.kind != "observation" or claim.verdict != "observed" or claim.id not in allowed:
            continue
        new = sorted(set(outcome_classes(claim.evidence)) - set(allowed[claim.id]))
        if new:
            out.append(f"{claim.id}: shows {', '.join(new)}, never recorded here (recorded: "
                       f"{', '.join(allowed[claim.id]) or 'none'}): {claim.evidence}")
    return out


def visible_gpus() -> int:
    """How many GPUs this machine's driver shows (the GPU tests run where their runs ran)."""
    from ctxlab.cuda.environment import device_count

    return device_count()


# ---------------------------------------------------------------- on every machine

def selected_scenarios(run) -> list:
    """The scenarios (``ctxlab.lab.Scenario``) the run's recorded options select (at its check level)."""
    from ctxlab.harness.runner import plan
    from ctxlab.labs import get_lab

    lab = get_lab(run.lab)
    known = {f.name for f in dataclasses.fields(lab.options)}
    options = lab.make_options(**{k: v for k, v in run.options.items() if k in known})
    return list(plan(lab, options).scenarios)


def invariant_problems(run) -> list[str]:
    """Everything in ``run`` that must not happen on any GPU, one line each (empty: none)."""
    import ctxlab

    problems = [f"scenario {e.get('scenario')} broke: {e.get('kind')}: {e.get('message', '')}".rstrip()
                for e in run.errors]
    if run.environment_error:
        return [*problems, f"the run could not start: {run.environment_error}"]
    seen: dict[str, set] = {}
    for o in run.observations:
        seen.setdefault(o.scenario, set()).add(o.repeat)
    level = run.options.get("level", 3)
    repeats = int(run.options.get("repeats", 1)) if level == 3 else 1  # below 3 each scenario runs once
    for scenario in selected_scenarios(run):
        if scenario.name not in seen:
            problems.append(f"scenario {scenario.name} was selected and recorded nothing")
            continue
        why = [o.value for o in run.observations if o.scenario == scenario.name and o.what == "skipped"]
        if any(not skips.text_of(reason or "").strip() for reason in why):
            problems.append(f"scenario {scenario.name} was skipped without a reason")
        elif any(skips.structure_of(reason) is None for reason in why):
            problems.append(f"scenario {scenario.name} was skipped without a structured reason (its kind): "
                            f"{skips.text_of(why[0])}")
        if scenario.undefined and seen[scenario.name] != set(range(repeats)):
            missing = sorted(set(range(repeats)) - seen[scenario.name], key=str)
            problems.append(f"scenario {scenario.name}: repeats {missing} of {repeats} recorded nothing")
    problems += _all_skipped(run)
    got = {c.id: c for c in run.claims}
    catalogue = {c.id: c for c in ctxlab.claims(run.lab)}
    problems += [f"{cid}: missing from the run (the lab's catalogue has it)" for cid in catalogue if cid not in got]
    for claim in run.claims:
        lowest = catalogue[claim.id].lowest_level if claim.id in catalogue else 3
        if claim.verdict == "unjudged" or lowest > level:
            if (claim.verdict == "unjudged") != (lowest > level):
                problems.append(f"{claim.id}: {claim.verdict} at level {level}; its lowest level is {lowest}")
        elif claim.verdict == "skipped" and not claim.evidence.strip():
            problems.append(f"{claim.id}: skipped without a reason")
        elif claim.verdict == "skipped" and claim.skip is None:
            problems.append(f"{claim.id}: skipped without a structured reason (its kind): {claim.evidence}")
        elif claim.verdict == "skipped" and (wrong := skips.contradiction(claim.skip, run.environment, gpus_of(run),
                                                                           level)):
            problems.append(f"{claim.id}: skipped for a reason the run's environment record contradicts: {wrong}")
        elif claim.verdict not in ALLOWED.get(claim.kind, set()):
            problems.append(f"{claim.id}: {claim.verdict} ({claim.kind}): {claim.evidence}")
    return problems


def gpus_of(run) -> int:
    """The GPUs the run's lab declares it needs (``Lab.gpus``)."""
    from ctxlab.labs import get_lab

    return get_lab(run.lab).gpus


def missing_here(skip, run) -> str | None:
    """Why ``skip`` (a structured reason, or None) is no reason for a lab, or a claim an expectations file decides,
    not to run on this runner; None where it is one: fewer GPUs than the lab needs, or two that cannot reach each
    other, as the run's environment record counts them; or a library that record shows is not installed. The
    reason's text is never read: a one-GPU lab skipped "needs 2 GPUs", or a library skipped "not installed" whose
    version the record holds, is a problem."""
    if skip is None:
        return "no structured reason (an older recording, or a skip recorded as text)"
    env = run.environment
    wrong = skips.contradiction(skip, env, gpus_of(run), run.options.get("level", 3))
    if wrong:
        return f"the run's environment record contradicts it: {wrong}"
    count = env.get("gpu_count")
    if skip.get("kind") == "hardware":
        if not isinstance(count, int):
            return "the run's environment records no GPU count to check it against"
        if skip.get("resource") == "gpus" or (skip.get("resource") == "peer-access" and count >= 2):
            return None
        return f"hardware it names ({skip.get('resource')}) this runner's {count} GPU(s) do not explain"
    if skip.get("kind") == "library" and skip.get("installed") is False:
        versions = skips.recorded_versions(env, skip.get("distributions") or ())
        return None if versions else "the run's environment records none of its distributions"
    return f"a {skip.get('kind')} reason is no missing hardware or missing library"


def _all_skipped(run) -> list[str]:
    """A lab whose every selected scenario was skipped: only for missing hardware or a missing library, as the
    run's own environment record shows them (``missing_here``)."""
    selected = [s.name for s in selected_scenarios(run)]
    if not selected:
        return []
    reasons: dict[str, list] = {}
    for o in run.observations:
        if o.scenario in selected:
            reasons.setdefault(o.scenario, []).append(o.value if o.what == "skipped" else None)
    if set(reasons) != set(selected) or any(None in why for why in reasons.values()):
        return []  # some scenario recorded something else: the lab ran
    problems = {f"every scenario of {run.lab} was skipped, not for missing hardware or a missing library: "
                f"{skips.text_of(r)} ({wrong})"
                for why in reasons.values() for r in why if (wrong := missing_here(skips.structure_of(r), run))}
    return sorted(problems)


def assert_invariants(run) -> None:
    """Fail naming every problem ``invariant_problems`` finds."""
    problems = invariant_problems(run)
    where = f"{run.lab} on {run.environment.get('gpu')} (driver {run.environment.get('driver_version')})"
    assert not problems, f"{where}:\n" + "\n".join(problems)


# ---------------------------------------------------------------- where expectations exist

def expected_for(run, table: dict, traced: bool = False, gpus: int | None = None) -> dict[str, str]:
    """The verdict ``table`` expects for each claim of the run's lab: a claim none of whose scenarios the
    run's options select (migrate's green claims under the default ``--context both``) is ``skipped``; so is a
    claim that needs two GPUs where ``gpus`` (default: this machine's) is fewer; a claim above the run's check
    level is ``unjudged``. A run made with ``trace`` (check traces lifecycle where it can) is judged traced."""
    import ctxlab

    catalogue = ctxlab.claims(run.lab)
    traced = traced or bool(run.options.get("trace"))
    expected = {**table["verdicts"], **(table.get("traced", {}) if traced else {})}
    if (gpus if gpus is not None else visible_gpus()) < 2:
        expected.update(dict.fromkeys(table.get("needs_two_gpus", {}).get("claims", ()), "skipped"))
    selected = {s.name for s in selected_scenarios(run)}
    out = {}
    for claim in catalogue:
        verdict = expected.get(claim.id)
        if verdict is not None and claim.lowest_level > run.options.get("level", 3):
            verdict = "unjudged"
        out[claim.id] = "skipped" if verdict not in (None, "unjudged") and not set(claim.scenarios) & selected \
            else verdict
    return out


def verdict_problems(run, table: dict, traced: bool = False, gpus: int | None = None) -> list[str]:
    """Every claim of the lab whose verdict in ``run`` is not the one ``table`` expects."""
    predicted = set(table.get("predicted", {}).get("claims", ()))
    got = {c.id: c for c in run.claims}
    out = []
    for cid, want in expected_for(run, table, traced, gpus).items():
        claim = got.get(cid)
        if claim is None or claim.verdict != want:
            note = ", a prediction" if cid in predicted else ""
            out.append(f"{cid}: {claim.verdict if claim else 'missing'} (expected {want}{note})"
                       + (f": {claim.evidence}" if claim else ""))
    return out


def driver_independent_problems(run, table: dict, traced: bool = False, gpus: int | None = None) -> list[str]:
    """Against a file for the same GPU under another driver or runtimes: a claim the file decides that the run
    skips for a reason other than a missing library, and a promise the file says holds that does not."""
    import ctxlab

    kinds = {c.id: c.kind for c in ctxlab.claims(run.lab)}
    got = {c.id: c for c in run.claims}
    out = []
    for cid, want in expected_for(run, table, traced, gpus).items():
        claim = got.get(cid)
        if claim is None or want in (None, "skipped", "unjudged"):
            continue
        if claim.verdict == "skipped":  # a library missing on this runner (its record says so) is no finding
            if claim.skip is None or claim.skip.get("kind") != "library" or missing_here(claim.skip, run):
                out.append(f"{cid}: skipped on the GPU its file decides it on ({want}): {claim.evidence}")
        elif kinds.get(cid) == "promise" and want == "holds" and claim.verdict != "holds":
            out.append(f"{cid}: {claim.verdict} (holds on this GPU under the file's driver): {claim.evidence}")
    return out


def assert_expected(run, traced: bool = False, gpus: int | None = None) -> None:
    """The invariants on every machine; the exact verdicts (and observations' outcome classes) where an
    expectations file exists for the run's environment, what does not depend on the driver where one exists
    for its GPU (``gpus`` visible: default this machine's)."""
    assert_invariants(run)
    table = expectations_for(run.environment)
    if table is not None:
        wrong = verdict_problems(run, table, traced, gpus) + outcome_problems(run, table)
        assert not wrong, f"{run.lab} against {slug(run.environment)}.json:\n" + "\n".join(wrong)
        return
    table = same_gpu(run.environment)
    if table is not None:
        name = slug(table["written_for"])
        wrong = driver_independent_problems(run, table, traced, gpus)
        assert not wrong, f"{run.lab} against {name}.json (same GPU, another driver or runtime):\n" + "\n".join(wrong)
        differ = verdict_problems(run, table, traced, gpus) + outcome_problems(run, table)
        if differ:
            warnings.warn(f"{run.lab}: on {run.environment.get('gpu')} under driver "
                          f"{run.environment.get('driver_version')}, these differ from {name}.json (the driver's "
                          f"or runtime's to change):\n" + "\n".join(differ), stacklevel=2)
        return
    warnings.warn(f"no expectations for {environment_key(run.environment)}: the invariants were checked, "
                  f"not the verdicts; write tests/gpu/expectations/{slug(run.environment)}.json from this "
                  f"machine's runs (python -m tests.gpu.expected RUN.json...)", stacklevel=2)


def skip_unless_expectations(run) -> dict:
    """The expectations for the run's environment, or skip the test that needs exact verdicts, saying why."""
    table = expectations_for(run.environment)
    if table is None:
        pytest.skip(f"no expectations for {slug(run.environment)} (tests/gpu/expectations/)")
    return table


def skipped_here(run, names) -> set[str]:
    """Those of the scenarios ``names`` that recorded why they could not run on this machine (no green contexts,
    one GPU): none may where expectations exist for the run's environment (they say what runs there)."""
    why = {o.scenario: o.value for o in run.observations if o.what == "skipped" and o.scenario in set(names)}
    if expectations_for(run.environment) is not None:
        assert not why, f"skipped on {slug(run.environment)}, whose expectations say they run: {why}"
    return set(why)


# ---------------------------------------------------------------- writing a new machine's file

def written_from(runs: list) -> dict:
    """An expectations table from one machine's untraced runs (every lab's): what that machine decided."""
    import ctxlab

    (env,) = {json.dumps(environment_key(r.environment), sort_keys=True) for r in runs} or {"{}"}
    first = runs[0].environment
    verdicts = {c.id: c.verdict for r in runs for c in r.claims}
    outcomes: dict[str, set] = {}
    for claim in (c for r in runs for c in r.claims if c.kind == "observation" and c.verdict == "observed"):
        outcomes.setdefault(claim.id, set()).update(outcome_classes(claim.evidence))
    return {"written_for": {**json.loads(env), "driver": first.get("driver", ""),
                            "libraries": {"cupy": first.get("cupy"), "cuda_bindings": first.get("cuda_bindings")}},
            "verdicts": {c.id: verdicts[c.id] for c in ctxlab.claims() if c.id in verdicts},
            "outcomes": {cid: sorted(outcomes[cid]) for cid in sorted(outcomes)},
            "traced": {},
            "needs_two_gpus": {"why": "the peer lab needs a second GPU: on a machine of one every claim is skipped "
                                      "with that reason", "claims": sorted(c.id for c in ctxlab.claims("peer"))}}


def main(argv: list[str]) -> int:
    """``python -m tests.gpu.expected RUN.json...``: write tests/gpu/expectations/<slug>.json from the runs."""
    import ctxlab

    runs = [run for path in argv for run in ctxlab.load(path)]
    if not runs:
        print("usage: python -m tests.gpu.expected RUN.json...", file=sys.stderr)
        return 2
    for run in runs:
        problems = invariant_problems(run)
        if problems:
            print(f"{run.lab}: not written, the run breaks the invariants:\n" + "\n".join(problems), file=sys.stderr)
            return 1
    path = EXPECTATIONS / f"{slug(runs[0].environment)}.json"
    path.write_text(json.dumps(written_from(runs), indent=2) + "\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
