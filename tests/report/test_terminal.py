"""Output that fits the terminal, verdicts first (issue 26): widths, wrapping, layout, colour, the summary."""

from __future__ import annotations

import io
import re

import pytest

from ctxlab.records.schema import VERDICTS
from ctxlab.records.shapes import runs_from_document
from ctxlab.report import render
from ctxlab.report.screen import Screen, clip, screen_for, text_width, wrap
from tests.conftest import RESULTS, recorded
from tests.hostile import claim, invoke, run, write

SGR = re.compile(r"\x1b\[[0-9;]*m")


class FakeTty(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def widths(text: str) -> list[int]:
    return [text_width(SGR.sub("", line)) for line in text.splitlines()]


def test_width_comes_from_columns_then_the_terminal_then_80():
    assert screen_for(FakeTty(False), {}).width == 80
    assert screen_for(FakeTty(False), {"COLUMNS": "132"}).width == 132
    assert screen_for(FakeTty(False), {"COLUMNS": "nonsense"}).width == 80
    assert screen_for(FakeTty(False), {"COLUMNS": "5"}).width == 20  # never narrower than readable
    assert screen_for(FakeTty(False), {"COLUMNS": "30"}).width == 30  # a narrow terminal is honoured (issue 38)
    assert screen_for(FakeTty(False), {"COLUMNS": "100000"}).width == 1000  # clamped, not ignored


def test_a_columns_below_the_narrowest_layout_is_said_once(capsys, monkeypatch):
    from ctxlab.report import screen

    monkeypatch.setattr(screen, "_TOLD_NARROW", set())
    assert screen_for(FakeTty(False), {"COLUMNS": "7"}).width == 20
    assert screen_for(FakeTty(False), {"COLUMNS": "7"}).width == 20
    err = capsys.readouterr().err
    assert err == "ctxlab: COLUMNS=7 is narrower than the narrowest layout: laid out at 20 columns\n"
    assert screen_for(FakeTty(False), {"COLUMNS": "20"}).width == 20 and capsys.readouterr().err == ""


def test_colour_only_on_a_terminal_and_never_with_no_color():
    assert screen_for(FakeTty(True), {}).colour
    assert not screen_for(FakeTty(True), {"NO_COLOR": "1"}).colour
    assert screen_for(FakeTty(True), {"NO_COLOR": ""}).colour  # no-color.org: only a non-empty value turns it off
    assert not screen_for(FakeTty(True), {"TERM": "dumb"}).colour
    assert not screen_for(FakeTty(False), {}).colour
    assert not screen_for(None, {}).colour


def test_words_are_never_split_unless_longer_than_the_line():
    text = "CUDA_ERROR_INVALID_VALUE came back from cuCtxPushCurrent and CUDA_ERROR_INVALID_CONTEXT after"
    for width in (27, 30, 40):  # CUDA_ERROR_INVALID_CONTEXT is 26
        lines = wrap(text, width)
        assert all(text_width(line) <= width for line in lines)
        assert " ".join(lines) == text  # every break is at a space
    assert wrap("x" * 50, 20) == ["x" * 20, "x" * 20, "x" * 10]
    assert wrap("CUDA_ERROR_INVALID_VALUE", 16) == ["CUDA_ERROR_", "INVALID_VALUE"]  # a long word folds at a mark
    assert all(text_width(line) <= 10 for line in wrap("日本語のテキストです日本語", 10))  # wide characters count 2


def test_a_cut_is_marked_and_fits():
    lines = clip("one two three four five six seven eight nine ten", 12, 2)
    assert len(lines) == 2 and lines[-1].endswith("…") and all(text_width(x) <= 12 for x in lines)


@pytest.mark.parametrize("width", [40, 80, 100, 120, 160, 200, 300])
@pytest.mark.parametrize("steps", [False, True])
def test_every_line_of_show_fits_its_width(width, steps):
    runs = runs_from_document(recorded("check.json"), "check.json")
    text = render(runs, "table", width=width, steps=steps)
    assert max(widths(text)) <= width


def test_every_line_of_claims_and_doctor_fits(monkeypatch):
    for columns in ("80", "200"):
        monkeypatch.setenv("COLUMNS", columns)
        for command in (["claims"], ["doctor"]):
            result = invoke(*command)
            assert result.exit_code in (0, 2), result.output
            assert max(widths(result.output)) <= int(columns), command


def test_below_120_columns_a_claim_is_stacked_and_from_120_a_row():
    runs = runs_from_document(recorded("migrate.json"), "migrate.json")
    narrow = render(runs, "table", width=80).splitlines()
    first = next(i for i, line in enumerate(narrow) if line.startswith("holds "))
    assert narrow[first].startswith("holds     migrate.state-follows-context: Runtime state")
    assert narrow[first + 1].startswith(" " * 10 + "24 of 24 handoffs verified")  # evidence folded under it
    wide = render(runs, "table", width=200)
    assert re.search(r"^holds\s+migrate\.state-follows-context\s+Runtime state.*24 of 24 handoffs", wide, re.M)


def test_show_gives_the_claims_first_and_steps_only_when_asked():
    default = invoke("show", RESULTS / "migrate.json")
    assert default.exit_code == 0
    assert "migrate: timeline" not in default.output and "migrate: claims" in default.output
    steps = invoke("show", RESULTS / "migrate.json", "--steps")
    assert steps.output.index("migrate: claims") < steps.output.index("migrate: timeline")
    assert steps.output.index("migrate: timeline") < steps.output.index("summary:")


def test_show_check_fits_about_a_screen_per_lab():
    runs = runs_from_document(recorded("check.json"), "check.json")
    text = render(runs, "table", width=80)
    claims = sum(len(r.claims) for r in runs)
    assert len(text.splitlines()) <= 3 * claims + 40 * len(runs)  # was 2,776 lines
    assert "2776" not in text and len(text.splitlines()) < 600


def test_the_summary_counts_every_verdict_in_one_order_and_lists_fails_and_errors(tmp_path):
    claims = [claim(v, id=f"demo.{v}", evidence=f"why {v}") for v in ("observed", "error", "holds", "fails", "changed")]
    doc = {"schema": "ctxlab/1", "runs": [run(lab="one", claims=claims), run(lab="two", claims=list(reversed(claims)))]}
    result = invoke("show", write(tmp_path / "r.json", doc))
    summary = result.output[result.output.index("summary:"):].splitlines()
    assert summary[1].split() == ["lab", *VERDICTS, "broke"]
    assert summary[2].split() == ["one", "1", "1", "1", "1", "-", "-", "1", "-"]
    assert summary[3].split() == ["two", "1", "1", "1", "1", "-", "-", "1", "-"]
    listed = [line for line in summary if line.startswith(("fails", "error"))]
    assert len(listed) == 4 and all("why" in line for line in listed)
    head = [line for line in result.output.splitlines() if line.startswith("5 claims")]
    assert head == ["5 claims: 1 holds, 1 fails, 1 changed, 1 observed, 1 error"] * 2  # the same order in both labs


def test_a_fails_claim_keeps_its_whole_evidence():
    long = " ".join(f"word{i}" for i in range(200))
    runs = runs_from_document(run(claims=[claim("fails", evidence=long), claim("holds", id="demo.b", evidence=long)]),
                              "r")
    text = render(runs, "table", width=80)
    assert "word199" in text.split("demo.b")[0]  # the failing claim: all of it
    assert "word199" not in text.split("demo.b")[1].split("summary:")[0]  # the holding one: cut to fit
    assert "word199" in render(runs, "table", width=80, full=True).split("demo.b")[1]


def test_colour_marks_verdicts_on_a_terminal_and_nowhere_else():
    runs = runs_from_document(run(claims=[claim("fails"), claim("holds", id="demo.b")]), "r")
    coloured = render(runs, "table", screen=Screen(80, True))
    assert "\x1b[1;97;41mfails\x1b[0m" in coloured and "\x1b[32mholds\x1b[0m" in coloured
    assert "\x1b" not in render(runs, "table", width=80)
    assert "\x1b" not in invoke("show", RESULTS / "migrate.json").output  # a pipe: plain


@pytest.mark.parametrize("columns", ["80", "200"])
def test_merge_as_a_table_fits_and_numbers_its_runners(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    result = invoke("report", "merge", RESULTS / "check.json", RESULTS / "check-peer-devices-all.json",
                    "--format", "table")
    assert result.exit_code in (0, 1), result.output
    assert max(widths(result.output)) <= int(columns)
    assert "[ 1] " in result.output and "claim" in result.output and "|" not in result.output
    assert invoke("report", "merge", RESULTS / "check.json").output.startswith("| claim |")  # a pipe: Markdown
