"""``ctxlab audit`` on the programs of examples/realworld/, each written from a public report: every hazard
program gets exactly its expected findings (rule, thread, the line marked ``# HAZARD: <rule>``, and for a
sticky error the line where it surfaced, marked ``# SYMPTOM: sticky-error``; where the entry's finding names a
``cause`` marker, ``# CAUSE: <rule>``, the finding's ``because`` must be located at that line), plus the
info findings its manifest entry lists by rule and thread, and nothing else: any other finding of any
severity, another of the same rule on another line or with another cause included, counts against it. Clean
programs get only their listed info findings. Programs that crash or hang are audited too (with the
manifest's time limits), and end as their entry says. Programs that need more GPUs than this machine has are
skipped with the reason. With CTXLAB_RESULTS set, each report and the score table are kept under
$CTXLAB_RESULTS/audit/realworld/ (``benchmarks/realworld_sanitizer.py`` adds compute-sanitizer's column)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "examples", "realworld", "manifest.json")
KEEP = os.environ.get("CTXLAB_RESULTS")
MODULES = {"torch": "torch", "cupy": "cupy", "jax": "jax", "numba": "numba.cuda", "cuda.core": "cuda.core",
           "cuda.bindings": "cuda.bindings"}


def programs() -> list[dict]:
    with open(MANIFEST) as handle:
        return json.load(handle)


def marked_line(path: str, marker: str) -> int:
    with open(os.path.join(ROOT, path)) as handle:
        found = [i for i, line in enumerate(handle, 1) if f"# {marker}" in line]
    assert len(found) == 1, (path, marker, found)
    return found[0]


def audit_args(entry: dict) -> list[str]:
    """The audit's options for a program: its time limits and extra arguments (scripts/corpus_args.py)."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from corpus_args import args_for

    return args_for(entry["program"])


def gpu_count() -> int:
    from ctxlab.cuda.environment import device_count

    return device_count()


def symptom_line(path: str, rule: str) -> int | None:
    with open(os.path.join(ROOT, path)) as handle:
        found = [i for i, line in enumerate(handle, 1) if f"# SYMPTOM: {rule}" in line]
    return found[0] if len(found) == 1 else None


ENDS = {"signal": ("signal",), "timeout": ("timeout", "stall"), "os._exit": ("exit",)}


def outcomes(entry: dict) -> list[dict]:
    """The entry's expected outcomes: itself, then each of its ``alternatives`` (for a program whose outcome the
    driver leaves undefined, as its header says: each replaces the findings, info and ending it names)."""
    return [entry, *({**entry, "findings": [], "info": [], "ends": "", **alt} for alt in entry.get("alternatives", ()))]


def score(entry: dict, doc: dict) -> dict:
    """The program's score against the first of its expected outcomes it meets exactly (or, where it meets
    none, against the first one)."""
    scored = [_score_one(outcome, doc) for outcome in outcomes(entry)]
    best = next((i for i, r in enumerate(scored) if r["exact"]), 0)
    return {**scored[best], "outcome": best}


def _score_one(entry: dict, doc: dict) -> dict:
    """What the audit found against one expected outcome: matched, missed, extra (every finding no expectation
    accounts for, whatever its severity or rule), and whether the program ended as expected."""
    findings = list(doc["findings"])
    left = list(findings)
    matched, missed = [], []
    for want in entry["findings"]:
        line = marked_line(entry["program"], want["marker"])
        symptom = symptom_line(entry["program"], want["rule"]) if want["rule"] == "sticky-error" else None
        cause = marked_line(entry["program"], want["cause"]) if want.get("cause") else None
        hit = next((f for f in left if f["rule"] == want["rule"] and (f.get("location") or {}).get("line") == line
                    and str(f["thread"]).startswith(want["thread"])
                    and (symptom is None or any(r["location"]["line"] == symptom for r in f.get("related", ())))
                    and (cause is None or ((f.get("because") or {}).get("location") or {}).get("line") == cause)),
                   None)
        if hit is not None:
            left.remove(hit)
        (matched if hit else missed).append({**want, "line": line, **({"cause_line": cause} if cause else {})})
    for want in entry.get("info", ()):
        hit = next((f for f in left if f["rule"] == want["rule"] and str(f["thread"]).startswith(want["thread"])),
                   None)
        if hit is not None:
            left.remove(hit)
        else:
            missed.append({**want, "line": None})
    extra = [{"rule": f["rule"], "severity": f["severity"], "thread": f["thread"],
              "line": (f.get("location") or {}).get("line")} for f in left]
    ending = doc.get("ending") or {}
    as_expected = ending.get("how") in ENDS.get(entry.get("ends", ""), ("exit",))
    return {"program": entry["program"], "kind": entry["kind"], "report": entry.get("report"),
            "matched": matched, "missed": missed, "extra": extra, "ending": doc.get("ending"),
            "ending_as_expected": as_expected, "exact": not missed and not extra and as_expected,
            "found": [{"rule": f["rule"], "severity": f["severity"], "thread": f["thread"],
                       "line": (f.get("location") or {}).get("line"), "location_from": f.get("location_from"),
                       "because_line": ((f.get("because") or {}).get("location") or {}).get("line"),
                       "calls": f.get("calls", [])[:6]} for f in findings]}


SCORES: list[dict] = []


@pytest.fixture(scope="module", autouse=True)
def score_table():
    yield
    if KEEP and SCORES:
        folder = os.path.join(KEEP, "audit", "realworld")
        os.makedirs(folder, exist_ok=True)
        from ctxlab.cuda.environment import capture
        from ctxlab.output import write_output

        table = {"environment": capture(0), "programs": SCORES,
                 "hazards": sum(s["kind"] == "hazard" for s in SCORES),
                 "hazards_found": sum(s["kind"] == "hazard" and not s["missed"] for s in SCORES),
                 "clean": sum(s["kind"] == "clean" for s in SCORES),
                 "clean_quiet": sum(s["kind"] == "clean" and not s["extra"] for s in SCORES)}
        write_output(os.path.join(folder, "realworld.json"), json.dumps(table, indent=1) + "\n")


@pytest.mark.parametrize("entry", programs(), ids=lambda e: os.path.basename(e["program"]))
def test_realworld_program_gets_exactly_its_expected_findings(tmp_path, entry):
    for need in entry.get("needs", ()):
        module = MODULES.get(need, need)
        if importlib.util.find_spec(module.split(".")[0]) is None or importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed here")
    if entry.get("gpus", 1) > gpu_count():
        pytest.skip(f"needs {entry['gpus']} GPUs, this machine has {gpu_count()}")
    folder = os.path.join(KEEP, "audit", "realworld") if KEEP else str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, os.path.basename(entry["program"]).replace(".py", ".json"))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    try:
        done = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "ctxlab", "audit", "--format", "json",
                               "-o", out, *audit_args(entry), "--", entry["program"]], capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=entry.get("timeout_s", 60) * 2 + 60)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"audit hung: {entry['program']}\n{(exc.stderr or b'')[-8000:]!r}")
    assert os.path.exists(out), done.stdout + done.stderr
    with open(out) as handle:
        doc = json.load(handle)
    result = score(entry, doc)
    SCORES.append(result)
    for f in doc["findings"]:
        assert f["thread"], f
        assert f["location"] or f.get("location_missing"), f
    assert not result["missed"], (result["missed"], result["found"], done.stderr[-3000:])
    assert not result["extra"], (result["extra"], done.stderr[-2000:])
    assert result["ending_as_expected"], doc["ending"]
    # the probe catalogue stays true: each entry occurs in the clean program that backs it
    from ctxlab.audit.rules.probes import PROBES

    for probe in (p for p in PROBES if p.program == entry["program"]):
        assert any(p["library"] == probe.library and p["call"].startswith(probe.call) and p["status"] == probe.status
                   for p in doc["probes"]), (probe, doc["probes"])
    assert all(p["why"] for p in doc["probes"]), doc["probes"]  # each probe says what shows it was one
