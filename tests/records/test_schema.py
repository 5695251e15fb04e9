"""The ``ctxlab/1`` JSON Schema (ctxlab/schema/, described in docs/schema.md) against the recorded results,
against what ``ctxlab.record`` writes, and against broken documents; and the project's docs stay self-contained."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest

from ctxlab.records.model import ClaimResult, LabResult, Observation, ResultFileError, dumps
from ctxlab.records.schema import KINDS, SCHEMA, SILENT_WRONG, VERDICTS
from ctxlab.records.shapes import runs_from_document
from ctxlab.schema import schema

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "labs" / "results"


def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def errors(document) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '<top>'}: {e.message}" for e in validator().iter_errors(document)]


def result_files() -> list[Path]:
    return sorted(RESULTS.rglob("*.json"))


def load(path: Path):
    return json.loads(path.read_text())


def is_ctxlab(document) -> bool:
    return isinstance(document, dict) and document.get("schema") == SCHEMA


# Every other kind of JSON file under labs/results, by the keys that make it that kind. A new kind of file
# there fails test_every_other_result_file_is_a_named_kind until it is named here.
OTHER_KINDS = {
    "benchmark figures: handoff breakdown (benchmarks/)":
        lambda d: {"environment", "iterations", "microseconds", "relay_by_threads"} <= d.keys(),
    "benchmark figures: the relay against the native one (benchmarks/relay_vs_native.py)":
        lambda d: {"environment", "threads", "handoffs", "native", "contexts"} <= d.keys(),
    "benchmark figures: trace overhead (benchmarks/)":
        lambda d: {"environment", "launches", "untraced_us_per_launch", "traced_us_per_launch", "ratio"} <= d.keys(),
    "doctor report (ctxlab doctor --format json)":
        lambda d: {"ctxlab", "python", "driver", "cupy", "cuda_bindings", "missing"} <= d.keys(),
    "trace (ctxlab trace, schema ctxlab-trace/1)":
        lambda d: d.get("schema") in ("ctxlab-trace/1", "ctxlab-trace/2") and {"program", "events"} <= d.keys(),
    "Perfetto / Chrome trace-event JSON (ctxlab trace --format perfetto)":
        lambda d: isinstance(d.get("traceEvents"), list) and "schema" not in d,
    "traced programs' exit status, output and overhead (tests/gpu/test_trace_programs.py)":
        lambda d: bool(d) and all(isinstance(v, dict) and "traced_seconds" in v for v in d.values()),
    "benchmark figures: CLI start-up (benchmarks/cli_startup.py)":
        lambda d: {"environment", "runs", "median_seconds", "max_seconds"} <= d.keys(),
    "audit report (ctxlab audit --format json, schema ctxlab-audit/1)":
        lambda d: str(d.get("schema", "")).startswith("ctxlab-audit/") and {"findings", "rules"} <= d.keys(),
    "claim catalogue (ctxlab claims --format json)":
        lambda d: set(d) == {"claims"} and all({"id", "kind", "scenarios"} <= c.keys() for c in d["claims"]),
    "benchmark figures: ways to hand a verified step between threads (benchmarks/handoff_variants.py)":
        lambda d: {"environment", "switch_interval_s", "runs"} <= d.keys(),
    "benchmark figures: processes starting CUDA at once (benchmarks/context_contention.py)":
        lambda d: {"environment", "rounds", "batches"} <= d.keys(),
    "benchmark figures: what ctxlab audit costs a whole program (benchmarks/audit_overhead.py)":
        lambda d: set(d) == {"environment", "programs"} and all("ratio" in p for p in d["programs"]),
    "benchmark figures: check at each level against the full check (benchmarks/check_levels.py)":
        lambda d: {"environment", "runs", "levels", "differences"} <= d.keys(),
    "timings of ctxlab check (wall seconds, per lab)":
        lambda d: {"wall_seconds", "labs"} <= d.keys() and "schema" not in d,
    "benchmark figures: report merge over a fleet's files (benchmarks/merge_fleet.py)":
        lambda d: {"environment", "files", "wall_seconds", "peak_rss_mib", "differs_line"} <= d.keys(),
    "benchmark figures: ctxlab show on a 64 MiB result (benchmarks/render_large.py)":
        lambda d: {"environment", "file_bytes", "observations", "formats", "within_goal"} <= d.keys(),
    "benchmark figures: ctxlab show on a result of one huge string (benchmarks/render_one_string.py)":
        lambda d: {"environment", "cases", "floor_mb", "within_goal"} <= d.keys(),
    "what a real Prometheus scraped from ctxlab's metrics (tests/report/test_prometheus_scrape.py)":
        lambda d: {"prometheus", "node_exporter", "queries"} <= d.keys(),
    "benchmark figures: threads starting CUDA at once, bare, traced, audited (benchmarks/trace_stress.py)":
        lambda d: {"environment", "timeout_seconds", "rows", "hung", "failed"} <= d.keys(),
    "benchmark figures: a PyTorch serving program bare, traced, audited (benchmarks/serving_overhead.py)":
        lambda d: {"environment", "workers", "requests", "summary", "rows"} <= d.keys(),
    "two check runs compared claim by claim (benchmarks/isolation_compare.py)":
        lambda d: set(d) == {"first", "second", "claims", "differ"} and isinstance(d["differ"], list),
    "the audit's score on examples/realworld beside compute-sanitizer (tests/gpu/test_realworld.py)":
        lambda d: {"environment", "programs", "hazards", "hazards_found", "clean", "clean_quiet"} <= d.keys(),
    "the audit's score on a folder of reports (benchmarks/realworld_score.py)":
        lambda d: {"programs", "audited", "exact", "hazards_exact", "clean_exact", "extras"} <= d.keys(),
    "benchmark figures: judging a synthetic launch loop on the CPU (benchmarks/judge_cost.py)":
        lambda d: set(d) == {"environment", "rows"} and all("us_per_launch" in r for r in d["rows"]),
    "benchmark figures: the C callback's own cost per call, without CUPTI (benchmarks/callback_cost.py)":
        lambda d: set(d) == {"environment", "rows"} and all("ns_per_call" in r for r in d["rows"]),
    "benchmark figures: a launch's cost under each tool, side by side (benchmarks/launch_cost.py)":
        lambda d: {"environment", "measures"} <= d.keys(),
    "compute-sanitizer on examples/realworld, and beside the audit's score (benchmarks/realworld_sanitizer.py)":
        lambda d: str(d.get("sanitizer", "")).startswith("compute-sanitizer") and "programs" in d
        and "hazards_found" not in d,
}


def test_the_schema_is_a_valid_draft_2020_12_schema():
    document = schema()
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(document)


def test_the_schema_knows_exactly_the_verdicts_and_kinds_of_the_code():
    defs = schema()["$defs"]
    assert tuple(defs["claim"]["properties"]["verdict"]["enum"]) == VERDICTS
    assert tuple(defs["claim"]["properties"]["kind"]["enum"]) == KINDS
    assert defs["claim"]["properties"]["kind"]["default"] == "observation"
    assert "kind" not in defs["claim"]["required"]  # files written before the field stay valid


def test_there_are_recorded_ctxlab_results_to_validate():
    assert len(ctxlab_files()) >= 2


def ctxlab_files() -> list[Path]:
    return [p for p in result_files() if is_ctxlab(load(p))]


@pytest.mark.parametrize("path", ctxlab_files(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_every_recorded_ctxlab_result_validates_and_loads(path):
    document = load(path)
    assert errors(document) == []
    assert runs_from_document(document, str(path))


def test_every_other_result_file_is_a_named_kind():
    unnamed, ambiguous = [], []
    for path in result_files():
        document = load(path)
        if is_ctxlab(document):
            continue
        kinds = [name for name, matches in OTHER_KINDS.items() if isinstance(document, dict) and matches(document)]
        if not kinds:
            unnamed.append(str(path.relative_to(RESULTS)))
        elif len(kinds) > 1:
            ambiguous.append(f"{path.relative_to(RESULTS)}: {kinds}")
    assert unnamed == [], "JSON files under labs/results that are neither ctxlab/1 nor a kind named in OTHER_KINDS"
    assert ambiguous == []


def full_run(lab: str = "demo") -> LabResult:
    """A run with every optional field set, an ``error`` verdict, every claim kind and a repeat."""
    return LabResult(
        lab=lab, started="2026-11-30T12:00:00+00:00", seconds=2.25,
        environment={"driver_version": 13000, "runtime_version": 13020,
                     "runtime_versions": {"cupy": 13020, "cuda_bindings": None}, "gpu": "NVIDIA H200",
                     "gpu_uuid": "GPU-0123abcd-4567-89ab-cdef-0123456789ab", "device": 0,
                     "compute_capability": "9.0", "cupy": "14.2.0", "cuda_bindings": "13.3.1",
                     "cupti_python": None, "python": "3.12.3", "hostname": "runner"},
        options={"device": 0, "repeats": 3, "trace": True},
        observations=(
            Observation("setup", "worker-1", 1, "context made", {"handle": 42, "ids": [1, 2]}, context=42,
                        scenario="handoff", round=0, events=("cuCtxCreate_v4  ctx 0x2a", "[CONTEXT_CREATED]")),
            Observation("use after release", "main", None, "outcome", f"{SILENT_WRONG}: 7 instead of 8",
                        scenario="release-then-use", repeat=2),
            Observation("note", "main", None, "anything", None)),
        claims=(ClaimResult("demo.promise", "A promise.", "Driver API", "holds", "seen", kind="promise"),
                ClaimResult("demo.broken", "A promise.", "Driver API", "error", "KeyError: 'x'", kind="promise"),
                ClaimResult("demo.old", "Old text.", "Old guide", "changed", "seen", kind="old-text"),
                ClaimResult("demo.seen", "What happens.", "-", "observed", "seen")),
        errors=({"scenario": "handoff#1", "kind": "timeout", "message": "did not finish", "output_tail": "..."},),
        metrics={"handoffs/s": 1234.5}, trace=({"name": "cuInit", "result": 0},), timings={"handoff": 1.5},
        views={"state": ("active", "flags")},
        flags=({"flag": SILENT_WRONG, "scenario": "release-then-use", "repeat": 2, "step": "use after release",
                "where": "outcome", "outcome": f"{SILENT_WRONG}: 7 instead of 8"},))


@pytest.mark.parametrize("as_list", [False, True], ids=["one run", "runs"])
def test_what_record_writes_validates(as_list):
    document = json.loads(dumps([full_run()], as_list=as_list))
    run = document["runs"][0] if as_list else document
    assert {"errors", "metrics", "trace", "timings", "views", "flags"} <= run.keys()
    assert any(o.get("repeat") == 2 for o in run["observations"])
    assert errors(document) == []


def test_several_runs_and_a_run_whose_environment_is_unknown_validate():
    unknown = LabResult("other", "2026-11-30T12:00:00+00:00", 0.5, {"device": 1, "unknown": "crash: died"},
                        {"device": 1}, (), (ClaimResult("o.c", "s", "src", "skipped", "no GPU"),))
    assert errors(json.loads(dumps([full_run(), unknown]))) == []


def test_the_schema_document_names_exactly_the_driver_variables_recorded():
    import re

    from ctxlab.cuda.environment import DRIVER_VARIABLES

    (row,) = [line for line in (ROOT / "docs" / "schema.md").read_text().splitlines()
              if line.startswith("| `driver_variables` |")]
    assert sorted(set(re.findall(r"CUDA_[A-Z_]+", row))) == sorted(DRIVER_VARIABLES)


def test_the_driver_variables_set_for_a_run_are_read_and_validate(monkeypatch, tmp_path):
    from ctxlab.cuda.environment import DRIVER_VARIABLES, driver_variables

    for name in DRIVER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))  # a path, not a driver setting: not recorded
    assert driver_variables() == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    document = json.loads(dumps([full_run()]))
    document["environment"]["driver_variables"] = driver_variables()
    assert errors(document) == []


def broken(mutate) -> dict:
    document = json.loads(dumps([full_run()]))
    mutate(document)
    return document


BROKEN = {
    "unknown verdict": lambda d: d["claims"][0].update(verdict="passes"),
    "unknown claim kind": lambda d: d["claims"][0].update(kind="rumour"),
    "missing claims": lambda d: d.pop("claims"),
    "claim without evidence": lambda d: d["claims"][0].pop("evidence"),
    "observation without step": lambda d: d["observations"][0].pop("step"),
    "seconds as text": lambda d: d.update(seconds="2.25"),
    "another schema": lambda d: d.update(schema="ctxlab/2"),
    "views that are not lists of fields": lambda d: d.update(views={"state": "active"}),
    "an error without its message": lambda d: d["errors"][0].pop("message"),
    "a flag without its name": lambda d: d["flags"][0].pop("flag"),
    "an environment field of the wrong type": lambda d: d["environment"].update(gpu=["NVIDIA H200"]),
    "a scenario time that is not a number": lambda d: d["timings"].update(x="1 s"),
    "a driver variable that is not text": lambda d: d["environment"].update(
        driver_variables={"CUDA_DEVICE_MAX_CONNECTIONS": 1}),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_documents_do_not_validate(name):
    assert errors(broken(BROKEN[name])) != []


def test_a_broken_run_inside_runs_does_not_validate():
    document = json.loads(dumps([full_run(), full_run("b")]))
    del document["runs"][1]["claims"]
    assert errors(document) != []
    document = copy.deepcopy(document)
    document["runs"] = "not a list"
    assert errors(document) != []


@pytest.mark.parametrize("name", ["unknown verdict", "unknown claim kind", "missing claims", "another schema"])
def test_what_the_schema_rejects_the_reader_rejects_too(name):
    with pytest.raises(ResultFileError):
        runs_from_document(broken(BROKEN[name]))


def test_old_files_without_kind_or_views_validate():
    document = json.loads(dumps([full_run()]))
    for claim in document["claims"]:
        del claim["kind"]
    for key in ("views", "flags", "errors", "metrics", "trace", "timings", "options"):
        del document[key]
    for observation in document["observations"]:
        observation.pop("repeat", None)
    del document["environment"]["gpu_uuid"]
    assert errors(document) == []


def test_the_schema_ships_as_package_data():
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "*.json" in data["tool"]["setuptools"]["package-data"]["ctxlab.schema"]
    assert any(req.startswith("jsonschema") for req in data["project"]["dependencies"])  # the loader validates


# Files outside the repository: a team page, a sibling checkout, this machine's paths (the folder the
# checkout lies in, unless that is the file system's root).
OUTSIDE = re.compile("|".join([r"DESIGN\.md", r"\.\./shared",
                               *([re.escape(f"{ROOT.parent}/")] if ROOT.parent != ROOT.parent.parent else [])]))


def project_texts() -> list[Path]:
    paths = [ROOT / "README.md", *sorted((ROOT / "labs").glob("*.md"))]
    for folder in (ROOT / "docs", ROOT / "ctxlab"):
        paths += sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return paths


def test_the_project_refers_to_no_file_outside_it():
    found = []
    for path in project_texts():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_the_schema_is_documented():
    page = (ROOT / "docs" / "schema.md").read_text()
    for word in (*VERDICTS, *KINDS, "runs", "repeat", "views", "flags", "timings", "unknown",
                 "ctxlab/schema/ctxlab-1.schema.json"):
        assert word in page, word
    assert "docs/schema.md" in (ROOT / "README.md").read_text()
