"""The figures users read are the recordings' (issue 35): every figure README, docs/fleet.md and labs/*.md
quote from a recording under labs/results/ is listed here with the recording it comes from, and the text
each shows is rebuilt from that recording. A re-recorded file whose figures moved fails here until the
prose says what it holds; a figure typed by hand that no recording gives cannot be listed."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "labs" / "results"


def _json(path: str) -> dict:
    return json.loads((RESULTS / path).read_text())


def _program(doc: dict, name: str) -> dict:
    return next(p for p in doc["programs"] if p["program"] == name)


def _launch_loop() -> dict:
    return _program(_json("audit/audit_overhead.json"), "launch-loop")


def _torch_step() -> dict:
    return _program(_json("audit/audit_overhead.json"), "examples/programs/torch_train_step.py")


def _launches() -> dict:
    return _json("audit/trace_overhead-audit.json")


def _corpus() -> dict:
    return _json("audit/wave4/final/realworld.json")


def _merge() -> dict:
    return _json("speed/merge-fleet-2cpu.json")


def _side() -> dict:
    return _json("audit/wave4/final/sanitizer/side-by-side.json")["table"]


def _level(level: str) -> dict:
    return _json("levels/levels.json")["levels"][level]


def _relay_row(kind: str) -> str:
    pairs = _json("speed/relay_vs_native.json")["contexts"][kind]
    cells = [" / ".join(f"{p[key]:,.0f}" for p in pairs["pairs"])
             for key in ("ctxlab_verified_per_s", "native_verified_per_s")]
    ratios = " / ".join(f"{p['ratio']:.3f}" for p in pairs["pairs"])
    return f"| {kind} | {cells[0]} | {cells[1]} | {ratios} | **{pairs['median_ratio']:.3f}** |"


_KINDS = ("primary", "created")
RUN3 = "relay_vs_native-run3.json"  # this session's first run: before the state was compared during the kernel


def _relay_pairs(name: str) -> list[dict]:
    contexts = _json(f"speed/{name}")["contexts"]
    return [p for k in _KINDS for p in contexts[k]["pairs"]]


def _span(values) -> tuple[float, float]:
    values = list(values)
    return min(values), max(values)


def _stress(folder: str = "wave4-raw") -> dict:
    return _json(f"{folder}/migrate-stress.json")["metrics"]  # one run: its object


# (document, the text it shows, built from the recording)
FIGURES: list[tuple[str, Callable[[], str]]] = [
    ("README.md", lambda: "at {:.3f} (primary)\n  and {:.3f} (created) of the fastest".format(
        *(_json("speed/relay_vs_native.json")["contexts"][k]["median_ratio"] for k in _KINDS))),
    ("labs/migrate.md", lambda: _relay_row("primary")),
    ("labs/migrate.md", lambda: _relay_row("created")),
    ("labs/migrate.md", lambda: "Against the floor: medians {:.3f} (primary) and {:.3f} (created)".format(
        *(_json("speed/relay_vs_native.json")["contexts"][k]["median_ratio_to_floor"] for k in _KINDS))),
    ("labs/migrate.md", lambda: "(`relay_vs_native-run4.json`): medians {:.3f} (primary) and {:.3f} (created)".format(
        *(_json("speed/relay_vs_native-run4.json")["contexts"][k]["median_ratio"] for k in _KINDS))),
    ("labs/migrate.md", lambda: "gave medians {:.3f}\n(primary) and {:.3f} (created)".format(
        *(_json("speed/relay_vs_native-run3.json")["contexts"][k]["median_ratio"] for k in _KINDS))),
    ("labs/migrate.md", lambda: "(medians {:.3f} and {:.3f} primary, {:.3f} and\n{:.3f} created)".format(
        *(_json(f"speed/relay_vs_native-run{n}.json")["contexts"][k]["median_ratio"]
          for k in _KINDS for n in (2, 1)))),
    ("labs/migrate.md", lambda: "made {:,.0f} to {:,.0f} verified handoffs\na second".format(
        *_span(p["native_verified_per_s"] for p in _relay_pairs("relay_vs_native.json")))),
    ("labs/migrate.md", lambda: "its floor\n{:,.0f} to {:,.0f}".format(
        *_span(p["native_floor_per_s"] for p in _relay_pairs("relay_vs_native.json")))),
    ("labs/migrate.md", lambda: "made {:,.0f} to {:,.0f} verified handoffs a second there\nagainst native relays of "
     "{:,.0f} to {:,.0f}".format(*_span(p["ctxlab_verified_per_s"] for p in _relay_pairs(RUN3)),
                                  *_span(p["native_verified_per_s"] for p in _relay_pairs(RUN3)))),
    ("labs/migrate.md", lambda: "verified {:,} (primary) and {:,} (created) handoffs a second".format(
        round(_stress()["primary: verified handoffs/s"]), round(_stress()["created: verified handoffs/s"]))),
    ("labs/migrate.md", lambda: "{:,} and {:,}, `labs/results/wave4-close/migrate-stress.json`".format(
        *(round(_stress("wave4-close")[f"{k}: verified handoffs/s"]) for k in _KINDS))),
    ("labs/audit.md", lambda: "| {:.3f} s | {:.3f} s | **{:.2f}x** |".format(
        _launch_loop()["bare_median"], _launch_loop()["audited_median"], _launch_loop()["ratio"])),
    ("labs/audit.md", lambda: "| {:.3f} s | {:.3f} s | **{:.2f}x** |".format(
        _torch_step()["bare_median"], _torch_step()["audited_median"], _torch_step()["ratio"])),
    ("labs/audit.md", lambda: "| {:.2f} µs/launch | {:.2f} µs/launch | {:.2f}x |".format(
        _launches()["untraced_us_per_launch"], _launches()["traced_us_per_launch"], _launches()["ratio"])),
    ("labs/audit.md", lambda: "adds {:.1f} µs per launch ({:,} records per run".format(
        _launches()["collect_us_per_launch"], _launches()["records_per_run"])),
    ("labs/audit.md", lambda: "{:.0f} µs more per launch".format(
        _launches()["traced_us_per_launch"] - _launches()["untraced_us_per_launch"])),
    ("labs/audit.md", lambda: "the audit's median time over the plain run is {:.2f}x ({} programs".format(
        _corpus()["audit_over_plain_median"], _corpus()["audit_over_plain_programs"])),
    ("labs/trace.md", lambda: "run at {:.1f} µs a launch against {:.1f} µs untraced (**{:.2f}x**".format(
        _launches()["traced_us_per_launch"], _launches()["untraced_us_per_launch"], _launches()["ratio"])),
    ("labs/trace.md", lambda: "reading the {:,} records into events afterwards takes {:.0f} µs a launch".format(
        _launches()["records_per_run"], _launches()["collect_us_per_launch"])),
    ("labs/trace.md", lambda: "the launch loop audited {:.2f}x, PyTorch training steps {:.2f}x".format(
        _launch_loop()["ratio"], _torch_step()["ratio"])),
    ("labs/audit.md", lambda: "it points at {} of the {} hazard programs, and the audit places all {} at the user's "
                              "line".format(_side()["sanitizer_points_at_hazards"],
                                            _side()["sanitizer_hazards_compared"],
                                            _side()["audit_places_what_the_sanitizer_points_at"])),
    ("labs/audit.md", lambda: "it reported something on {} of the {} clean programs".format(
        _side()["sanitizer_reports_on_clean"], _side()["clean"])),
    ("docs/fleet.md", lambda: "in {:.1f} s of CPU on a 2-CPU machine, median of three, and in about as much wall "
                              "time with both CPUs busy with other work ({:.1f} s; before issue 51, {:.1f} s of CPU "
                              "and {:.1f} s on the same machine".format(
        _merge()["median_cpu_seconds"], _merge()["median_wall_seconds"], _merge()["before"]["median_cpu_seconds"],
        _merge()["before"]["median_wall_seconds"])),
    ("README.md", lambda: "{} of {} one-GPU programs written from public reports get exactly their expected "
                          "findings".format(_corpus()["exact"], _corpus()["audited"])),
    ("README.md", lambda: "`--level 1` judges node health (the promises a context handoff rests on) in {:.1f} s "
                          "on an H200, `--level 2` every documented claim in {:.1f} s, `--level 3` (the default) "
                          "everything in {:.1f} s".format(_level("1")["median_s"], _level("2")["median_s"],
                                                          _level("3")["median_s"])),
    ("docs/fleet.md", lambda: "| {:.1f} s | {} | {} |".format(_level("1")["median_s"], _level("1")["judged"],
                                                               _level("1")["unjudged"])),
    ("docs/fleet.md", lambda: "| {:.1f} s | {} (5 skipped".format(_level("2")["median_s"], _level("2")["judged"])),
    ("docs/fleet.md", lambda: "| {:.1f} s (one run) | {} ({} skipped) | {} |".format(
        _level("3")["median_s"], _level("3")["judged"], _level("3")["skipped"], _level("3")["unjudged"])),
    ("docs/fleet.md", lambda: "level 2 took {:.1f} s before that ordering".format(
        _json("levels/unordered/levels.json")["levels"]["2"]["median_s"])),
    ("docs/fleet.md", lambda: "`check --level 1` ({:.1f} s on an H200".format(_level("1")["median_s"])),
    ("fleet/slurm/ctxlab-healthcheck.sh", lambda: "`ctxlab check --level 1` itself (CTXLAB_LEVEL; {:.1f} s on an "
                                                  "H200".format(_level("1")["median_s"])),
    ("fleet/node-exporter/ctxlab-metrics.sh", lambda: "1: node health, {:.1f} s on an H200".format(
        _level("1")["median_s"])),
    ("fleet/kubernetes/ctxlab-daemonset.yaml", lambda: "{:.1f} s on an H200".format(_level("1")["median_s"])),
]


def _flat(text: str) -> str:
    """Prose as read: line breaks and comment markers (#) of wrapped text are spaces."""
    return re.sub(r"\s+", " ", re.sub(r"\n\s*#\s?", " ", text))


@pytest.mark.parametrize("document, figure", FIGURES, ids=[f"{d}-{i}" for i, (d, _) in enumerate(FIGURES)])
def test_a_quoted_figure_is_what_its_recording_holds(document, figure):
    shown = _flat(figure())
    assert shown in _flat((ROOT / document).read_text()), f"{document} should show: {shown}"


def test_a_moved_figure_is_caught():
    """The check bites: a recording whose figure moved no longer matches the prose."""
    doc = _json("audit/trace_overhead-audit.json")
    moved = dict(doc, traced_us_per_launch=doc["traced_us_per_launch"] + 1.0)
    text = _flat((ROOT / "labs/audit.md").read_text())
    figure = "| {:.2f} µs/launch | {:.2f} µs/launch | {:.2f}x |".format(
        moved["untraced_us_per_launch"], moved["traced_us_per_launch"], moved["ratio"])
    assert _flat(figure) not in text


def test_the_stale_figures_of_the_issue_are_gone():
    """labs/audit.md's cost section quoted 1.67x, 0.86x, 3.05x, 70.8 µs and 20,014 events after its
    recordings had moved on."""
    cost = (ROOT / "labs/audit.md").read_text().split("## Cost", 1)[1]
    for stale in ("1.67x", "0.86x", "3.05x", "70.8 µs", "20,014"):
        assert stale not in cost, stale
