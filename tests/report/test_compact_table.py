"""The table's default is compact (issue 26: ``ctxlab show labs/results/check.json`` fits about one screen
per lab): a claim is a line or two, the skipped claims of a lab one entry; ``--full`` shows each whole."""

from __future__ import annotations

import pytest

from ctxlab.records.shapes import runs_from_document
from ctxlab.report import render
from tests.conftest import recorded
from tests.hostile import claim, run


def sections(text: str) -> dict[str, list[str]]:
    """Each lab's lines (from its heading to the blank line after it), by lab."""
    out: dict[str, list[str]] = {}
    for block in text.split("\n\n")[:-1]:  # the last block is the summary
        lines = block.strip("\n").splitlines()
        out[lines[0].split()[0]] = lines
    return out


@pytest.mark.parametrize("width, per_claim", [(80, 2), (200, 1)])
def test_every_lab_of_check_fits_about_a_screen(width, per_claim):
    runs = runs_from_document(recorded("check.json"), "check.json")
    labs = sections(render(runs, "table", width=width))
    assert set(labs) == {r.lab for r in runs}
    for result in runs:
        shown = sum(c.verdict != "skipped" for c in result.claims)
        # heading, claims header and counts line, figures, the skipped entry: 16 lines at most besides the claims
        assert len(labs[result.lab]) <= per_claim * shown + 16, (result.lab, len(labs[result.lab]))
        if len(result.claims) <= 16:
            assert len(labs[result.lab]) <= 50, result.lab  # one screen
    total = len(render(runs, "table", width=width).splitlines())
    assert total < {80: 330, 200: 200}[width]  # was 449 and 421 (2,776 before issue 26)


def test_skipped_claims_are_one_entry_with_every_id_and_full_lists_each():
    claims = [claim("holds", id="demo.a"), *(claim("skipped", id=f"demo.s{i}", evidence=f"needs {i} GPUs")
                                             for i in range(4))]
    runs = runs_from_document(run(claims=claims), "r")
    for width in (80, 200):
        text = render(runs, "table", width=width)
        entry = [line for line in text.splitlines() if line.startswith("skipped")]
        assert len(entry) == 1 and entry[0].split(None, 1)[1].startswith("4 claims: demo.s0, demo.s1")
        assert "demo.s3" in text and "why (1 of 4 reasons; --full: each): needs 0 GPUs" in text
        assert "needs 3 GPUs" not in text
        full = render(runs, "table", width=width, full=True)
        assert sum(line.startswith("skipped") for line in full.splitlines()) == 4 and "needs 3 GPUs" in full


def test_one_skipped_claim_is_a_row_like_the_others():
    runs = runs_from_document(run(claims=[claim("holds", id="demo.a"), claim("skipped", id="demo.s", evidence="why")]),
                              "r")
    text = render(runs, "table", width=80)
    assert "1 claims:" not in text and any(line.startswith("skipped   demo.s: ") for line in text.splitlines())


def test_a_lab_of_skipped_claims_has_no_empty_header():
    runs = runs_from_document(run(claims=[claim("skipped", id=f"demo.s{i}", evidence="one reason")
                                          for i in range(3)]), "r")
    text = render(runs, "table", width=200)
    assert "evidence" not in text and "why: one reason" in text


def test_evidence_is_one_line_unless_it_fails_or_full():
    long = " ".join(f"word{i}" for i in range(60))
    runs = runs_from_document(run(claims=[claim("observed", id="demo.o", evidence=long),
                                  claim("error", id="demo.e", evidence=long)]), "r")
    narrow = render(runs, "table", width=80).splitlines()
    at = next(i for i, line in enumerate(narrow) if line.startswith("observed"))
    assert narrow[at + 1].startswith(" " * 10 + "word0") and narrow[at + 1].endswith("…")
    assert narrow[at + 2].startswith("error")
    assert "word59" in render(runs, "table", width=80, full=True).split("demo.e")[0]


def test_steps_tables_are_bounded_and_say_where_the_rest_is():
    from ctxlab.report.steps import EVENTS, ROWS

    step = {"step": "s", "thread": "t", "context_id": 1, "context": 42, "what": "seen", "value": {"n": 1}}
    many = [{**step, "round": i} for i in range(ROWS + 5)]
    noisy = {**step, "events": [f"cuCall{i}" for i in range(EVENTS + 7)]}
    runs = runs_from_document(run(observations=[noisy, *many], views={}), "r")
    text = render(runs, "table", width=200, steps=True)
    assert "... and 6 more steps (--format markdown or json has every one)" in text
    assert "... and 7 more events" in text and f"cuCall{EVENTS - 1}" in text and f"cuCall{EVENTS}" not in text
    table = runs_from_document(run(observations=many, views={"seen": ["n"]}), "r")
    assert "... and 5 more seen steps" in render(table, "table", width=200, steps=True)
    few = runs_from_document(run(observations=many[:ROWS]), "r")
    assert "more steps" not in render(few, "table", width=200, steps=True)


def test_recorded_step_tables_are_whole():
    runs = runs_from_document(recorded("check.json"), "check.json")
    assert "more steps" not in render(runs, "table", width=200, steps=True)


def test_the_timeline_page_draws_the_first_steps_of_a_long_scenario():
    from ctxlab.report.timeline import STEPS, render_html

    step = {"step": "s", "thread": "t", "context_id": 1, "context": 42, "what": "seen", "value": {}, "scenario": "x"}
    page = render_html(runs_from_document(run(observations=[{**step, "round": i} for i in range(STEPS + 3)]), "r"))
    assert page.count('<g class="cell"') == STEPS and f"the first {STEPS:,} drawn, 3 more" in page
    short = render_html(runs_from_document(run(observations=[step] * 5), "r"))
    assert short.count('<g class="cell"') == 5 and "drawn" not in short
