"""One huge string in a result file (issue 38, item 1): every renderer's work and output are linear in the
file's size, every line of the table fits its width, and a text the screen or a Markdown cell cuts says
how much is left out and where it is whole. Work is counted (the lines of ctxlab.report run), never timed:
benchmarks/render_one_string.py has the times, labs/results/speed/render_one_string.txt the figures."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.records.model import LabResult
from ctxlab.records.shapes import runs_from_document as parse_runs
from ctxlab.report import render, screen
from ctxlab.report.escape import terminal
from ctxlab.report.json_stream import iter_dumps
from ctxlab.report.screen import iter_wrap, text_width, wrap
from ctxlab.report.text import TEXT_CHARS, shown_as_is
from tests.hostile import claim, run

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

FIELDS = ("evidence", "statement", "id", "source", "reason", "lab", "scenario", "thread", "step", "message",
          "output_tail", "metric", "gpu_name")


def document(field: str, text: str, claims: int = 6) -> dict:
    """A result of ``claims`` claims (fails, holds, skipped ones, an error), ``text`` in ``field``."""
    made = [claim("fails", id="demo.fails"), claim("holds", id="demo.holds"),
            *(claim("skipped", id=f"demo.skipped{i}", evidence="no GPU") for i in range(claims - 2))]
    doc = run(claims=made, errors=[{"scenario": "s", "kind": "crash", "message": "it broke", "output_tail": "tail"}],
              metrics={"handoffs per second": 1234.5})
    doc["observations"].append({**doc["observations"][0], "what": "step done", "value": {"ok": True}})
    where = {"evidence": made[0], "statement": made[0], "id": made[1], "source": made[0], "reason": made[2]}
    if field in where:
        where[field]["evidence" if field == "reason" else field] = text
        if field == "reason":
            made[3]["evidence"] = text  # the skipped claims' one reason, shown together
    elif field == "lab":
        doc["lab"] = text
    elif field in ("scenario", "thread", "step"):
        for observation in doc["observations"]:
            observation[field] = text
    elif field in ("message", "output_tail"):
        doc["errors"][0][field] = text
    elif field == "metric":
        doc["metrics"] = {text: 1.5}
    elif field == "gpu_name":
        doc["environment"]["gpu"] = text
    return doc


def runs_of(doc: dict) -> list[LabResult]:
    return parse_runs(json.loads(json.dumps(doc)), "one-string.json")


RENDERERS: dict[str, Callable[[list[LabResult]], str]] = {
    "table": lambda runs: render(runs, "table", width=80),
    "table --full": lambda runs: render(runs, "table", width=80, full=True),
    "table --steps": lambda runs: render(runs, "table", width=80, steps=True),
    "table wide --full": lambda runs: render(runs, "table", width=200, full=True),
    "markdown": lambda runs: render(runs, "markdown"),
    "junit": lambda runs: render(runs, "junit"),
    "json": lambda runs: "".join(iter_dumps(runs)),
}
CUT = {"table", "table --steps", "markdown"}  # what cuts a long text: its work stays as the text grows

# Texts that defeat a wrapper in different ways: one word (the fold), words, wide and combining characters
# (widths not lengths), marks to fold after, lines.
KINDS = {"word": "x", "words": "lorem ipsum ", "wide": "日本語", "marks": "e\u0301", "folds": "CUDA_ERROR_",
         "lines": "a line\n", "mixed": "héllo wörld 日本 "}


class OverBudget(Exception):
    pass


def lines_run(work: Callable[[], object], budget: int | None = None) -> int:
    """How many lines of ctxlab.report's code ``work`` runs (stopping at ``budget``: quadratic work would
    otherwise take minutes to be counted)."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
            if budget is not None and count > budget:
                raise OverBudget(f"more than {budget} lines")
        return local

    def calls(frame, event, arg):
        return local if frame.f_globals.get("__name__", "").startswith("ctxlab.report") else None

    sys.settrace(calls)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def of_size(kind: str, size: int) -> str:
    unit = KINDS[kind]
    return (unit * (size // len(unit) + 1))[:size]


@pytest.mark.parametrize("mode", sorted(RENDERERS))
@pytest.mark.parametrize("field", ["evidence", "statement", "id", "lab", "scenario", "message", "output_tail"])
def test_the_work_is_linear_in_a_string_s_size(field, mode):
    """Eight times the string, at most eight times the work (plus what the rest of the result costs); the
    table, steps and Markdown, which cut it, no more work at all."""
    for kind in ("word", "wide", "marks", "words", "lines"):
        small = runs_of(document(field, of_size(kind, 5 * TEXT_CHARS)))
        large = runs_of(document(field, of_size(kind, 40 * TEXT_CHARS)))
        once = lines_run(lambda: RENDERERS[mode](small))  # noqa: B023 (run here, in this iteration)
        budget = (once + 500) if mode in CUT else 9 * once + 2000
        try:
            eight = lines_run(lambda: RENDERERS[mode](large), budget)  # noqa: B023
        except OverBudget:
            pytest.fail(f"{mode} of an {kind} {field}: 8x the string is more than {budget} lines (1x: {once})")
        assert eight <= budget, (kind, once, eight)


@pytest.mark.parametrize("field", FIELDS)
def test_no_report_is_larger_than_a_few_times_its_input(field):
    """Output linear in input: a name repeated per claim (the lab in JUnit's classname) is cut first."""
    text = of_size("words", 100_000)
    doc = document(field, text, claims=60)
    runs, size = runs_of(doc), len(json.dumps(doc))
    for mode, renderer in RENDERERS.items():
        assert len(renderer(runs)) <= 3 * size + 50_000, (mode, field)


def test_a_cut_says_how_much_is_left_and_where():
    text = of_size("word", 50_000)
    runs = runs_of(document("evidence", text))  # a fails claim: its evidence is shown whole unless too long
    table = " ".join(render(runs, "table", width=80).split())
    assert f"({50_000 - TEXT_CHARS:,} more characters: --full or --format json)" in table
    full = render(runs, "table", width=80, full=True)
    assert full.count("x") >= 50_000 and "more characters: --full" not in full
    assert "more characters: --format json)" in render(runs, "markdown")
    assert json.loads("".join(iter_dumps(runs)))["claims"][0]["evidence"] == text  # JSON: always whole
    names = " ".join(render(runs_of(document("id", text)), "table", width=80, full=True).split())
    assert "more characters: --format json)" in names  # a name is cut even with --full


@st.composite
def long_texts(draw) -> str:
    unit = draw(st.lists(st.sampled_from(["a", "bc", " ", "  ", "\n", "\t", "-", ".", "_", "/", "日", "é", "\u0301",
                                          "\u3000", "\x1b[31m", "\u00a0", "CUDA_ERROR_", "x" * 30]),
                         min_size=1, max_size=12).map("".join))
    return unit * draw(st.integers(1, 60_000 // len(unit)))


@settings(max_examples=60, deadline=None)
@given(text=long_texts(), field=st.sampled_from(FIELDS), width=st.integers(20, 300),
       options=st.sampled_from([{}, {"full": True}, {"steps": True}]))
def test_every_line_fits_whatever_the_string(text, field, width, options):
    shown = render(runs_of(document(field, text)), "table", width=width, **options)
    assert max(text_width(line) for line in shown.splitlines()) <= width


@settings(max_examples=300, deadline=None)
@given(text=long_texts(), width=st.integers(2, 120), chunk=st.integers(1, 50))
def test_the_fold_keeps_every_word_and_streams_the_same_lines(text, width, chunk):
    whole = wrap(text, width)
    assert all(text_width(line) <= width for line in whole)
    assert len(whole) >= text.count("\n") + 1  # every newline still breaks
    assert "".join("".join(whole).split()) == "".join(text.split())  # nothing lost, nothing added
    if max((text_width(w) for w in text.split()), default=0) <= width:
        assert " ".join(whole).split() == text.split()  # no word folded: breaks only between words
    saved = screen.CHUNK
    screen.CHUNK = chunk  # paragraphs made single-spaced a few characters at a time: the same lines
    try:
        assert list(iter_wrap(text, width)) == whole
    finally:
        screen.CHUNK = saved


@given(st.text(st.characters(max_codepoint=0x3000)))
def test_printable_ascii_skips_the_escaper_and_nothing_else_does(text):
    assert shown_as_is(text) == terminal(text)


BENCHMARK = [sys.executable, str(Path(__file__).resolve().parents[2] / "benchmarks" / "render_one_string.py")]


@pytest.mark.parametrize("args", [["--sizes", "5T"], ["--sizes", "1M,x"], ["--fields", "nope"], ["--kinds", ""],
                                  ["--runs", "0"], ["--sizes", "2K"], ["--source", "/nonexistent.json"]])
def test_the_benchmark_refuses_bad_arguments_in_one_line(args):
    done = subprocess.run([*BENCHMARK, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("render_one_string.py: error:")


def test_a_small_benchmark_run_writes_its_figures(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run([*BENCHMARK, "--sizes", "64K", "--fields", "evidence", "--kinds", "word", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert case["string_chars"] > 30_000 and set(case["formats"]) == {"table", "full", "steps", "markdown", "junit",
                                                                       "json", "html"}
    assert case["formats"]["full"]["report_bytes"] > case["string_chars"] > case["formats"]["table"]["report_bytes"]


@settings(max_examples=40, deadline=None)
@given(text=long_texts(), field=st.sampled_from(FIELDS), piece=st.integers(1, 5000))
def test_the_json_stream_is_the_document_whatever_its_pieces(text, field, piece):
    from ctxlab.records.model import dumps
    from ctxlab.report import json_stream

    runs = runs_of(document(field, text))
    saved = json_stream.PIECE
    json_stream.PIECE = piece
    try:
        chunks = list(iter_dumps(runs))
    finally:
        json_stream.PIECE = saved
    assert "".join(chunks) == dumps(runs)
    if field not in ("scenario", "thread", "step") and len(text) > 10 * piece:  # not in an observation
        assert max(map(len, chunks)) < len(text)  # never the string whole in one piece


@pytest.mark.parametrize("field", ["scenario", "lab", "thread"])
def test_the_timeline_shows_a_huge_name_cut_and_says_so(field):
    """The HTML timeline showed a scenario's name three times (its heading, two attributes) and a lab's twice:
    a 64 MiB name made a page of 550 MB. It shows each name cut, saying how many characters more there are."""
    from ctxlab.report.timeline import render_html

    name = "n" * 300_000
    page = render_html(runs_of(document(field, name)))
    assert name not in page and "more characters: --format json" in page
    assert len(page) < 200_000
