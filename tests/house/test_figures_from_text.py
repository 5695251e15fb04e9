"""The figures of README, docs/ and labs/*.md, found from the text itself, each held to the recordings its
place cites or marked as not recorded (issue 49, item 2). `test_recorded_figures.py` binds 34 figures to exact
keys by hand; this finds every figure with a unit and every count (`figures_scan.py` says what counts), so a
figure edited anywhere fails: a recorded one is no longer held (its last digit moved by one is held by no
value its place cites), a marked one no longer matches its mark."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import pytest

from tests.house.figures_scan import (
    NUMBER,
    RESULTS,
    ROOT,
    Document,
    Figure,
    Place,
    Recordings,
    assign,
    documents,
    fold,
    read,
    reread,
)

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

DOCUMENTS = documents()


@cache
def recordings() -> Recordings:
    return Recordings()


@dataclass
class Placed:
    """A figure with the verdict on it: the recordings of its place, the one that holds it, its mark."""

    figure: Figure
    place: Place
    files: list[str]
    holder: str | None
    mark: str | None  # the kind of the mark naming it


@dataclass
class Problem:
    """What the test reports: the kind ("figure", "mark") and where and why."""

    kind: str
    text: str


def recordings_of(place: Place, recs: Recordings) -> list[str]:
    """The recordings a place's figures are held to: those of the nearest level that cites any."""
    for names in place.cited:
        files = sorted({f for n in names for f in recs.resolve(n)})
        if files:
            return files
    return []


def edit_held(p: Placed, recs: Recordings) -> str | None:
    """How an edit of the figure's last digit (+1, then -1) would still be held; None: every such edit fails."""
    for step in (1, -1):
        moved = p.figure.edited(step)
        holder = recs.holder(p.files, moved) if moved else None
        if moved and holder:
            return f"{step:+d} in its last digit ({moved.number:.{max(moved.decimals, 0)}f}) is held by {holder}"
    return None


def judge(name: str, line: int, place: Place, masked: str, recs: Recordings) -> tuple[list[Placed], list[Problem]]:
    """One place's figures with their verdicts, and its problems: a figure neither recorded nor marked, a mark
    that names what its place does not hold or is not of the one form, an ambiguous mark not needed."""
    files = recordings_of(place, recs)
    problems = [Problem("mark", f"{name}:{line}: {mark.problem}") for mark in place.marks if mark.problem]
    kinds, left = assign(place, masked)
    problems += [Problem("mark", f"{name}:{line}: the mark names {entry!r}, not a figure of its {place.kind} "
                                 "(or not one more: an entry names one figure, or one run of figures)")
                 for _, entry in left]
    placed = []
    for fig in place.figures:
        p = Placed(fig, place, files, recs.holder(files, fig) if files else None, kinds.get(fig.start))
        placed.append(p)
        where = f"{name}:{line}: {fig.text!r}"
        if p.holder is None and p.mark != "not recorded":
            shown = ", ".join(f.removeprefix(RESULTS + "/") for f in files[:3]) + (" ..." if files[3:] else "")
            held = f"none of {shown} holds it" if files else "its place cites no recording"
            context = fold(masked[max(place.start, fig.start - 60):fig.end])
            problems.append(Problem("figure", f"{where} is not marked, and {held} ({context!r})"))
        elif p.mark == "ambiguous" and not edit_held(p, recs):
            problems.append(Problem("mark", f"{where} is marked ambiguous, but an edit of it is caught"))
    return placed, problems


def judged(doc: Document, recs: Recordings) -> tuple[list[Placed], list[Problem]]:
    """Every figure of a document with its verdict, and every problem."""
    placed: list[Placed] = []
    problems: list[Problem] = []
    for place in doc.places:
        more, wrong = judge(doc.name, doc.line(place.start), place, doc.masked, recs)
        placed += more
        problems += wrong
    return placed, problems


def check(name: str, text: str, recs: Recordings) -> list[str]:
    """The problems of one document's text."""
    return [p.text for p in judged(read(name, text), recs)[1]]


@cache
def document(name: str) -> Document:
    return read(name, (ROOT / name).read_text())


@cache
def verdicts(name: str) -> tuple[list[Placed], list[Problem]]:
    return judged(document(name), recordings())


def edited(text: str, fig: Figure, offset: int, step: int) -> str | None:
    """Text with the figure's last number moved by step in its last digit (None: it would go below zero)."""
    moved = fig.edited(step)
    if moved is None:
        return None
    last = list(re.finditer(NUMBER, text[fig.start - offset:fig.end - offset]))[-1]
    old = last.group()
    decimals = len(old.split(".")[1]) if "." in old else 0
    value = float(old.replace(",", "")) + step * 10.0 ** -decimals
    if value < 0:
        return None
    new = f"{value:,.{decimals}f}" if "," in old else f"{value:.{decimals}f}"
    at = fig.start - offset + last.start()
    return text[:at] + new + text[at + len(old):]


def edit_caught(doc: Document, p: Placed, step: int, recs: Recordings) -> bool | None:
    """Whether the place, read again with the figure edited, has a problem (None: no such edit)."""
    place = p.place
    text = edited(doc.text[place.start:place.end], p.figure, place.start, step)
    if text is None:
        return None
    again, masked = reread(place, text)
    return bool(judge(doc.name, doc.line(place.start), again, masked, recs)[1])


# ---- the documents ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_figure_is_held_by_a_recording_its_place_cites_or_marked_as_not_recorded(name: str) -> None:
    wrong = [p.text for p in verdicts(name)[1] if p.kind == "figure"]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_mark_is_of_the_one_form_and_names_only_figures_of_its_place(name: str) -> None:
    wrong = [p.text for p in verdicts(name)[1] if p.kind == "mark"]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_a_figure_edited_by_one_in_its_last_digit_fails(name: str) -> None:
    """Each figure, +1 and -1 in its last digit: a recorded one is then held by no value its place cites (or
    the edit leaves a mark naming a figure gone), a marked one leaves its mark naming what is not there."""
    doc, recs = document(name), recordings()
    missed = [f"{doc.name}:{doc.line(p.figure.start)}: {p.figure.text!r} {step:+d}"
              for p in verdicts(name)[0] for step in (1, -1) if edit_caught(doc, p, step, recs) is False]
    assert not missed, "edits not caught:\n" + "\n".join(missed)


def test_the_documents_hold_figures_and_most_are_recorded() -> None:
    """The scanner finds figures (a scanner that found none would pass everything above)."""
    placed = [p for name in DOCUMENTS for p in verdicts(name)[0]]
    assert len(placed) > 300
    assert sum(p.holder is not None and p.mark is None for p in placed) > 100


# the issue's proof cases: each passed the hand list of test_recorded_figures.py, each must fail here, naming the
# figure as edited (no recording holds it) or as it was (its mark names a figure no longer there)
PROOFS = [
    ("README.md", "traced at 1.21x", "1.21x", "1.22x"),
    ("README.md", "the table 3.4 s", "3.4 s", "3.5 s"),
    ("README.md", "wave 3: 60 traced runs", "60 traced runs", "61 traced runs"),
    ("labs/trace.md", "traced **4.51 s", "4.51 s", "4.52 s"),
    ("labs/audit.md", "sanitizer took 2.12x", "2.12x", "2.13x"),
]


@pytest.mark.parametrize("name, where, before, after", PROOFS, ids=[p[3] for p in PROOFS])
def test_the_issues_edits_fail(name: str, where: str, before: str, after: str) -> None:
    text = (ROOT / name).read_text()
    assert text.count(where) == 1
    assert check(name, text, recordings()) == []
    problems = check(name, text.replace(where, where.replace(before, after)), recordings())
    assert any(f"'{after}'" in p or f"'{before}'" in p for p in problems), problems


# ---- the scanner itself, on made-up text and recordings ---------------------------------------------------

RUN = "labs/results/speed/run.json"


def made(text: str, values: Sequence[float] = (), name: str = RUN) -> list[str]:
    return check("made.md", text, Recordings(values={name: values}))


def found(text: str) -> list[str]:
    return [f.text for place in read("made.md", text).places for f in place.figures]


def test_a_figure_is_held_at_its_precision_in_the_unit_the_recording_keeps() -> None:
    assert made("It took 3.4 s (`speed/run.json`).", [3.433]) == []
    assert made("It took 166 ms (`speed/run.json`).", [0.1662]) == []
    assert made("It used 256 MiB (`speed/run.json`).", [268435456]) == []
    assert made("It took 3.4 s (`speed/run.json`).", [3.46])  # 3.5 s at that precision
    assert made("It took 3.4 s (`other.json`).", [3.433])  # cites nothing that exists


def test_a_figure_in_code_a_comment_a_fence_a_link_or_a_path_is_no_figure() -> None:
    assert found("`took 3.4 s` and <!-- 5 s --> and [x](a/5 s) and labs/results/wave4-raw/ and "
                 "issue 51, wave 3\n\n```\n9 s\n```\n") == []
    assert found("took 3.4 s") == ["3.4 s"]


def test_a_figure_split_over_a_line_break_is_found_and_held() -> None:
    assert found("it took 3.4\ns and 5 min\n32 s") == ["3.4 s", "5 min 32 s"]
    assert made("It took 3.4\ns (`speed/run.json`).", [3.41]) == []
    assert made("It took 3.5\ns (`speed/run.json`).", [3.41])


def test_counts_ranges_and_lists_are_figures() -> None:
    assert found("60 traced runs, 83 of 95, 50 to 57 µs, 1.05x, 1.09x and 1.18x, 10 million calls") == [
        "60 traced runs", "83", "95", "50", "57 µs", "1.05x", "1.09x", "1.18x", "10 million calls"]
    assert found("Python 3.12, CUDA 13.0, 1000 × major, 2 threads, item 2 of 3, h200-x2, wave-4 runs") == []


def test_a_mark_excuses_exactly_the_figures_it_names() -> None:
    assert made("Goal 8 s, recorded 3.4 s (`speed/run.json`).<!-- not recorded: 8 s (the goal) -->",
                [3.41]) == []
    stale = made("Goal 9 s.<!-- not recorded: 8 s (the goal) -->")
    assert any("'9 s' is not marked" in p for p in stale) and any("names '8 s'" in p for p in stale)
    assert made("3 min 16 s and 3 min 20 s.<!-- not recorded: 3 min 16 s and 3 min 20 s (runs not kept) -->") == []
    assert made("5 s.<!-- not recorded: 5 s -->")  # no reason
    assert made("5 s.<!-- not recorded 5 s (why) -->")  # not the form


def test_a_mark_in_another_row_or_paragraph_excuses_nothing() -> None:
    assert made("| a | 8 s |\n| b<!-- not recorded: 8 s (the goal) --> | 9 s |\n")
    assert made("Goal 8 s.\n\n<!-- not recorded: 8 s (the goal) -->\n")


def test_an_ambiguous_mark_is_for_a_recorded_figure_whose_edit_is_held() -> None:
    text = "Median 3.8 s (`speed/run.json`).<!-- ambiguous: 3.8 s (a run took 3.68 s) -->"
    assert made(text, [3.81, 3.68]) == []
    assert any("edit of it is caught" in p for p in made(text, [3.81]))  # not needed
    assert made(text, [3.68])  # not recorded at all: 3.7 s
    assert made("Median 3.8 s (`speed/run.json`).", [3.81, 3.68]) == []  # loose, but found only by the edit test


def test_citations_resolve_by_suffix_and_folder_nearest_first() -> None:
    recs = Recordings(values={"labs/results/a/x.json": [1.0], "labs/results/b/y.txt": [2.0]})
    assert recs.resolve("x.json") == recs.resolve("labs/results/a/x.json") == ["labs/results/a/x.json"]
    assert recs.resolve("results/b/") == ["labs/results/b/y.txt"]
    assert recs.resolve("a/{x,z}.json") == ["labs/results/a/x.json"]
    text = ("# A (`b/y.txt`)\n\nIt took 2.0 s.\n\n## B\n\n| 1.0 s (`x.json`) |\n| 2.0 s |\n\nAnd 3.0 s.\n\n"
            "## C\n\nThen 4.0 s.\n")
    doc = read("made.md", text)
    assert [recordings_of(p, recs) for p in doc.places if p.figures] == [
        ["labs/results/b/y.txt"],  # its section's
        ["labs/results/a/x.json"], ["labs/results/a/x.json"],  # its row's, then its table's
        ["labs/results/a/x.json"],  # its section's
        ["labs/results/a/x.json", "labs/results/b/y.txt"]]  # its document's


def test_the_edit_test_catches_a_loose_figure() -> None:
    text = "Median 3.8 s (`speed/run.json`)."
    recs = Recordings(values={RUN: [3.81, 3.68]})
    doc = read("made.md", text)
    (p,), problems = judged(doc, recs)
    assert problems == [] and edit_caught(doc, p, -1, recs) is False and edit_caught(doc, p, 1, recs) is True
