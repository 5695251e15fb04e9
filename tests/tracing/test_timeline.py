"""The HTML timeline of a recorded lab run (ctxlab show RUN.json --html FILE): structure, on CPU."""

import re
from html.parser import HTMLParser

from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.files import load_runs
from ctxlab.records.model import Observation
from ctxlab.report.timeline import render_html, scenario_svg
from tests.conftest import RESULTS


class Lanes(HTMLParser):
    """Collects, per scenario SVG, its lanes' threads and its cells."""

    def __init__(self):
        super().__init__()
        self.scenarios: dict[str, dict] = {}
        self.current = None
        self.urls: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a:
                self.urls.append(a[key])
        if tag == "script":
            self.scripts += 1
        if tag == "svg" and "data-scenario" in a:
            self.current = self.scenarios.setdefault(a["data-scenario"], {"lanes": [], "cells": []})
        elif tag == "g" and self.current is not None:
            cls = a.get("class", "").split()
            if "lane" in cls:
                self.current["lanes"].append(a["data-thread"])
            elif "cell" in cls:
                self.current["cells"].append((a["data-thread"], a["data-context"], a["data-step"]))


def parse(text):
    parser = Lanes()
    parser.feed(text)
    return parser


def expected_lanes(run):
    out: dict[str, list[str]] = {}
    for o in run.observations:
        lanes = out.setdefault(o.scenario, [])
        if o.thread not in lanes:
            lanes.append(o.thread)
    return out


def test_migrate_timeline_has_a_lane_per_thread_and_a_cell_per_step():
    (run,) = load_runs(RESULTS / "migrate.json")
    page = parse(render_html([run]))
    lanes = {name: s["lanes"] for name, s in page.scenarios.items()}
    assert lanes == expected_lanes(run)
    handoff = page.scenarios["handoff-primary"]
    assert handoff["lanes"] == ["worker-1", "worker-2", "worker-3", "worker-4", "MainThread"]
    assert len(handoff["cells"]) == sum(o.scenario == "handoff-primary" for o in run.observations)
    # the baton: worker-1, 2, 3, 4 hold context 1 in turn within each round
    handoffs = [(t, c) for t, c, step in handoff["cells"] if step == "handoff"]
    assert [t for t, _ in handoffs[:4]] == ["worker-1", "worker-2", "worker-3", "worker-4"]
    assert {c for _, c in handoffs} == {"1"}


def test_the_page_is_self_contained():
    (run,) = load_runs(RESULTS / "migrate.json")
    text = render_html([run])
    page = parse(text)
    assert page.urls == [] and page.scripts == 0
    assert not re.search(r"(?<!xmlns=\")https?://", text)  # nothing fetched; the SVG namespace is a name only
    assert text.startswith("<!DOCTYPE html>")


def test_refcount_states_show_the_context_changing_from_step_to_step():
    (run,) = load_runs(RESULTS / "refcount.json")
    page = parse(render_html([run]))
    cells = page.scenarios["runtime-1"]["cells"]
    contexts = [c for _, c, _ in cells]
    assert contexts[0] == "" and "1" in contexts and "2" in contexts  # none, then 1, then a new one after reset
    assert sorted(page.scenarios["created"]["lanes"]) == ["A", "B", "MainThread"]


def test_text_is_escaped():
    obs = [Observation(step="<b>step</b>", thread="t&1", context_id=None, what="x", value={"v": "<i>"},
                       scenario="s")]
    svg = scenario_svg("s<1>", obs)
    assert "<b>" not in svg and "&lt;b&gt;step" in svg and 'data-thread="t&amp;1"' in svg


def test_show_html_writes_the_page(tmp_path):
    out = tmp_path / "migrate.html"
    result = CliRunner().invoke(cli, ["show", str(RESULTS / "migrate.json"), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    table = CliRunner().invoke(cli, ["show", str(RESULTS / "migrate.json")]).output
    assert result.output.startswith(table) and f"wrote the timeline to {out}" in result.output  # as merge does
    bad = CliRunner().invoke(cli, ["show", str(RESULTS / "migrate.json"), "--html", str(tmp_path / "no" / "x.html")])
    assert bad.exit_code == 2 and bad.output.startswith("Error:")
