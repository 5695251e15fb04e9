"""report merge at fleet scale does no more work than its output needs (issue 38): each distinct evidence is
normalised once, and only where the fleet view compares it; the matrix is built once for Markdown, HTML and the
gate; the compiled schema check makes no Python call per observation; the distributions in evidence are found
in one pass. Counted, never timed: the times are benchmarks/merge_fleet.py's (labs/results/speed/)."""

from __future__ import annotations

import dataclasses
import re
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
import ctxlab.report.matrix
import ctxlab.report.merge
from ctxlab.records import evidence
from ctxlab.report.merge import failing, render_html, render_markdown
from ctxlab.schema import compiled, schema
from ctxlab.schema.compiled import compile_schema
from tests.conftest import RESULTS, recorded


def fleet(copies: int) -> list:
    """``copies`` runners of the recorded check, every third on an older driver with one observation changed."""
    runs = ctxlab.load(RESULTS / "check.json")
    out = []
    for n in range(copies):
        env = {"hostname": f"node-{n}", **({"driver_version": 12080} if n % 3 == 2 else {})}
        changed = []
        for run in runs:
            claims = tuple(dataclasses.replace(c, evidence=c.evidence + " (older driver)")
                           if n % 3 == 2 and c.verdict == "observed" and i == 0 else c
                           for i, c in enumerate(run.claims))
            changed.append(dataclasses.replace(run, environment={**run.environment, **env}, claims=claims))
        out.append((f"runner-{n}.json", changed))
    return out


def test_each_distinct_evidence_is_normalised_once_and_only_where_groups_differ(monkeypatch):
    calls: list[str] = []

    def counted(text: str) -> str:
        calls.append(text)
        return evidence.normalize(text)

    for module in (ctxlab.report.merge, ctxlab.report.matrix):  # wherever the matrix finds it
        monkeypatch.setattr(module, "normalize", counted, raising=False)
    files = fleet(9)
    render_markdown(files), render_html(files), failing(files)
    # the rows whose recorded outcomes differ between the groups: one changed evidence in each lab
    changed = {c.evidence for _, runs in files for r in runs for c in r.claims if c.evidence.endswith("(older driver)")}
    assert changed and len(calls) == len(set(calls)) <= 2 * len(changed)


def test_the_matrix_is_built_once_for_markdown_html_and_the_gate(monkeypatch):
    placed: list[object] = []
    real = ctxlab.report.merge.runner_key
    monkeypatch.setattr(ctxlab.report.merge, "runner_key", lambda run: placed.append(run) or real(run))
    files = fleet(4)
    render_markdown(files), render_html(files), failing(files)
    assert len(placed) == sum(len(runs) for _, runs in files)
    again = [(origin, [dataclasses.replace(runs[0], environment={**runs[0].environment, "hostname": "moved"}),
                       *runs[1:]]) for origin, runs in files]
    assert "moved" in render_markdown(again)  # other runs: a new matrix


def python_calls(check, document) -> int:
    """The Python calls the check makes (its own code only: whatever else a test run hooks in is not counted)."""
    count = 0
    own = {compiled.__file__, "<ctxlab/1 schema>"}

    def profile(frame, event, arg):
        nonlocal count
        count += event == "call" and frame.f_code.co_filename in own

    sys.setprofile(profile)
    try:
        assert check(document)
    finally:
        sys.setprofile(None)
    return count


def test_the_compiled_check_makes_no_python_call_per_observation():
    check = compile_schema(schema())
    doc = recorded("refcount.json")
    few = {**doc, "observations": doc["observations"][:2]}
    many = {**doc, "observations": doc["observations"][:2] * 500}
    assert python_calls(check, few) == python_calls(check, many)


def reference(text: str) -> str:
    return evidence._SPREAD.sub(evidence._spread, text)


PIECES = st.sampled_from(["A", "B", "correct", "silent-wrong-result", " in 2 of 3", " in 1 of 3", " in 3 of 3",
                          " in 1 of 4", ", ", "; ", ": ", " and ", " x", "(", ")", " ", "10", " of "])


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_distributions_are_found_as_re_sub_finds_them(text):
    assert evidence._spreads(text) == reference(text)


def test_a_long_stretch_is_scanned_once(monkeypatch):
    tries = 0
    real = evidence._SPREAD

    class Counted:
        def match(self, text: str, at: int):
            nonlocal tries
            tries += 1
            return real.match(text, at)

    monkeypatch.setattr(evidence, "_SPREAD", Counted())
    text = "x" * 5000 + " in 2 of 3, y in 1 of 3; " + "z" * 5000 + ": w in 1 of 1"
    expected = real.sub(evidence._spread, text)
    assert evidence._spreads(text) == expected
    assert tries <= len(re.findall("[,;:]", text)) + 2  # a try where a match can start, not at every character
