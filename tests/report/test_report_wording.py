"""The smaller report items of issue 12 point 5: figures, handles, JUnit times, claims before timelines."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ctxlab.records.shapes import runs_from_document
from ctxlab.report import render
from tests.conftest import recorded


def runs(name: str):
    return runs_from_document(recorded(name), name)


def test_rates_are_not_printed_with_13_decimals():
    for fmt in ("markdown", "table"):
        text = render(runs("migrate.json"), fmt, width=200) if fmt == "table" else render(runs("migrate.json"), fmt)
        assert "handoffs/s" in text
        assert not any(len(part) > 6 for line in text.splitlines() if "handoffs/s" in line
                       for part in line.replace(",", "").split(".")[1:2])


def test_pointers_are_hex_in_every_view():
    text = render(runs("refcount.json"), "markdown") + render(runs("migrate.json"), "table", width=300, steps=True)

    handles = re.findall(r'"(?:current|pointer|handle|primary)[a-z_\\]*": "?(\w+)', text)
    assert handles and all(h.startswith("0x") or len(h) < 7 for h in handles), handles


def test_junit_errors_carry_the_time_their_scenario_ran():
    from tests.hostile import run

    doc = run(errors=[{"scenario": "slow", "kind": "timeout", "message": "m"}], timings={"slow": 12.5})
    text = render(runs_from_document(doc, "r.json"), "junit")
    case = next(c for c in ET.fromstring(text.split("\n", 1)[1]).iter("testcase") if c.get("name") == "demo.slow")
    assert float(case.get("time")) == 12.5


def test_the_table_shows_the_claims_before_the_timelines():
    text = render(runs("migrate.json"), "table", width=200, steps=True)
    assert text.index("migrate: claims") < text.index("migrate: timeline")
    assert "migrate: timeline" not in render(runs("migrate.json"), "table", width=200)  # steps only when asked


def test_the_driver_variables_a_run_was_given_are_in_its_report_line():
    (run,) = runs("migrate.json")
    env = {**run.environment, "driver_variables": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}
    from dataclasses import replace

    line = render([replace(run, environment=env)], "markdown").splitlines()[2]  # Markdown escapes the _
    assert line.startswith("NVIDIA H200") and r"CUDA\_DEVICE\_MAX\_CONNECTIONS=1" in line
    assert "MAX" not in render([run], "markdown").splitlines()[2]
