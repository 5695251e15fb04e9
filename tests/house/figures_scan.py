"""Find the figures of the prose from its text and hold each to the recordings it cites (issue 49, item 2).

A figure is a number with a unit (ns, µs, ms, s, min, "N min M s" as one, x, %, bytes and their binary and
decimal multiples) or a count of what recordings count ("60 traced runs", "83 of 95"); a bare number joined
to a figure ("50 to 57 µs", "0.90 -> 0.89 s") is one in the same unit. Numbers in code, comments, link
targets, paths, versions and names (issue 49, wave 3, level 1) are not figures.

A figure's recordings are the files under labs/results/ cited by name (a path suffix; a folder stands for
every recording under it) in its table row, else its paragraph (a list item and a heading are paragraphs),
else its section, else its document. It is recorded when one of their values is the figure at its quoted
precision, in any of the units a recording keeps (seconds or milliseconds, bytes or MiB, a fraction or a
percentage). A JSON recording gives its numeric values, typed by their key where it names a time, a size or a
name (`wall_seconds`, `peak_rss_mib`, `line`); a text one every number in its text, typed by a unit written
after it (`12.3 s`, `[ 15%]`) or a counted noun (`34 passed`), JUnit's attributes by their name
(`failures="2"`). So a count is never a percentage, a time or a line number, a time never a size; a count is
an integer held as it is, and where a text recording counts the figure's noun, only such a number holds it.

A figure no recording of its place holds is marked as such in its paragraph or row, with why:

    <!-- not recorded: 8 s, 10 s (the goal); 5 min 32 s (a run not kept) -->

and a recorded figure whose last digit could move by one and still be held (a median beside its runs) is
marked ambiguous, with why: `<!-- ambiguous: 3.8 s (level 1's runs round to 3.7 s as well) -->`. An entry is
the figure as written, or a run of figures ("3 min 16 s and 3 min 20 s"); a mark names only figures of its
place, so an edited figure fails whether it was recorded or marked.
"""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = "labs/results"


def documents(root: Path = ROOT) -> list[str]:
    """The prose the figures test reads: README.md, docs/*.md and labs/*.md."""
    found = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "labs").glob("*.md"))]
    return [p.relative_to(root).as_posix() for p in found]


# ---- units ---------------------------------------------------------------------------------------------

_TIME = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}
_BYTES = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9}
# unit -> (family, the unit in the family's base: seconds, bytes)
FAMILY: dict[str, tuple[str, float]] = {**{u: ("time", k) for u, k in _TIME.items()},
                                        **{u: ("bytes", float(k)) for u, k in _BYTES.items()},
                                        "x": ("x", 1.0), "%": ("%", 1.0), "count": ("count", 1.0),
                                        "rate": ("rate", 1.0)}
# A bare recorded value times one of these is the figure in its unit: a value kept in seconds,
# milliseconds, microseconds or nanoseconds; in bytes or one of their multiples; a fraction or a percentage.
SCALES: dict[str, tuple[float, ...]] = {
    **{u: tuple(sorted({k / v for k in (1e-9, 1e-6, 1e-3, 1.0)})) for u, v in _TIME.items()},
    **{u: tuple(sorted({k / v for k in (*_BYTES.values(), 2**40)})) for u, v in _BYTES.items()},
    "x": (1.0,), "%": (1.0, 100.0), "count": (1.0,), "rate": (1.0,),
}
_SPELLED = {"us": "µs", "μs": "µs", "seconds": "s", "second": "s", "sec": "s", "minutes": "min",
            "minute": "min", "byte": "bytes", "B": "bytes", "×": "x"}
UNIT = r"µs|μs|us|ms|ns|seconds?|sec|s|minutes?|min|KiB|MiB|GiB|KB|MB|GB|bytes?|%"
# What the prose counts that a recording counts too: runs, programs and tests, their outcomes, the records,
# calls and events of a trace, claims and findings, files, handoffs. Not threads, workers, GPUs, requests,
# steps or characters: those are a run's settings (what it was asked), which a recording repeats as given.
COUNT_NOUNS = ("runs?", "programs?", "launch(?:es)?", "records?", "calls?", "callbacks?", "events?", "claims?",
               "verdicts?", "findings?", "tests?", "passed", "skipped", "failed", "files?", "observations?",
               "mutants?", "survivors?", "handoffs?", "children", "hazards?")
# A number right after one of these words is a name (issue 51, wave 3, level 1, Python 3.12), not a figure.
LABELS = frozenset((
    "issue issues item items wave waves level levels area areas question questions device devices round rounds "
    "part section status exit python cuda driver version versions figure line lines repeat row column sigterm "
    "sigint signal rule pr gpu ctxlab numpy cupy cupti cuda-bindings numba-cuda slurm-wlm capability").split())


# ---- recordings ----------------------------------------------------------------------------------------

JSON_SUFFIXES = (".json", ".sarif")
TEXT_SUFFIXES = (".txt", ".tsv", ".log", ".xml")
NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_NOUNS = "|".join(COUNT_NOUNS)
_TEXT_NUMBER = re.compile(r"(?<![\d.])(" + NUMBER + r")(?:[eE]([-+]?\d+))?(?:[ \t]?(" + UNIT + r"|x|×|B)(?!\w)"
                          r"|[ \t]+(" + _NOUNS + r")(?!\w))?")


def noun(word: str) -> str:
    """A counted noun, singular: launches and launch, runs and run are one (and JUnit's failures, failed)."""
    word = word.lower()
    word = word[:-2] if word.endswith("ches") else word[:-1] if word.endswith("s") else word
    return "failed" if word == "failure" else word


_ATTRIBUTE = re.compile(r"([A-Za-z_]+)=\"(" + NUMBER + r")\"")


# What a JSON key says its value is: a name (a line, an id), a time or a size (in a unit the key may not say),
# or anything (a count, a ratio, a rate).
_KEYS = ((re.compile(r"(^|_)(line|lineno|col|column|pid|tid|port|addr|address|handle|id)$"), "name"),
         (re.compile(r"per_s$|/s$"), ""),
         (re.compile(r"second|(^|_)(s|ms|us|ns)($|_)|time"), "json:time"),
         (re.compile(r"bytes|(^|_)(mib|mb|kib|gib|gb|rss)($|_)"), "json:bytes"))


def _key_family(key: str) -> str:
    return next((family for pattern, family in _KEYS if pattern.search(key.lower())), "")


def _walk(node: object, out: dict[str, list[float]], family: str = "") -> None:
    if isinstance(node, bool):
        return
    if isinstance(node, int | float):
        if math.isfinite(node):
            out.setdefault(family, []).append(abs(float(node)))
    elif isinstance(node, dict):
        for key, value in node.items():
            _walk(value, out, _key_family(str(key)))
    elif isinstance(node, list):
        for value in node:
            _walk(value, out, family)


def recording_values(path: Path) -> dict[str, list[float]]:
    """A recording's numbers by family, sorted. JSON: "" for a value its key says nothing of, "json:time" and
    "json:bytes" for one its key names a time or a size, "name" for a line or an id. Text: "" for a number
    with no unit after it, the family of the unit written after it (in the family's base unit), "count:NOUN"
    for one followed by a counted noun ("34 passed"); a number right after a colon (file:line, 0:03:03) is
    left out."""
    out: dict[str, list[float]] = {"": []}
    if path.name.endswith(JSON_SUFFIXES):
        try:
            _walk(json.loads(path.read_text(errors="replace")), out)
        except ValueError:
            pass
    else:
        text = path.read_text(errors="replace")
        for m in _ATTRIBUTE.finditer(text):  # JUnit's tests="4" failures="2" time="1.045"
            family = "time" if m.group(1) in ("time", "seconds") else f"count:{noun(m.group(1))}"
            out.setdefault(family, []).append(float(m.group(2).replace(",", "")))
        for m in _TEXT_NUMBER.finditer(text):
            if m.string[m.start() - 1:m.start()] in (":", '"'):
                continue
            value = float(m.group(1).replace(",", "")) * 10.0 ** min(int(m.group(2) or 0), 300)
            family, base = FAMILY[_SPELLED.get(m.group(3), m.group(3))] if m.group(3) else ("", 1.0)
            out.setdefault(f"count:{noun(m.group(4))}" if m.group(4) else family, []).append(value * base)
    return {k: sorted(v) for k, v in out.items()}


def _any_within(values: Sequence[float], lo: float, hi: float) -> bool:
    i = bisect.bisect_left(values, lo - abs(lo) * 1e-12)
    return i < len(values) and values[i] <= hi + abs(hi) * 1e-12


class Recordings:
    """The files under labs/results/ by their path from the root, each read once, on first use."""

    def __init__(self, root: Path = ROOT, values: Mapping[str, Sequence[float]] | None = None) -> None:
        self.root = root
        self._values: dict[str, dict[str, list[float]]] = {}
        if values is not None:  # made-up recordings (the tests of the scanner itself): bare values
            self._values = {name: {"": sorted(abs(v) for v in vs)} for name, vs in values.items()}
            self.files = sorted(self._values)
        else:
            self.files = sorted(p.relative_to(root).as_posix() for p in (root / RESULTS).rglob("*")
                                if p.is_file() and p.name.endswith(JSON_SUFFIXES + TEXT_SUFFIXES))
        self.folders = sorted({f.rsplit("/", i)[0] for f in self.files for i in range(1, f.count("/"))})
        self._resolved: dict[str, list[str]] = {}

    def values(self, name: str) -> dict[str, list[float]]:
        """The sorted numbers of one recording (a path from the root), by family."""
        if name not in self._values:
            self._values[name] = recording_values(self.root / name)
        return self._values[name]

    def resolve(self, cited: str) -> list[str]:
        """The recordings a cited name stands for, by path suffix (a folder: every recording under it)."""
        if cited in self._resolved:
            return self._resolved[cited]
        out: set[str] = set()
        for name in _expand_braces(re.sub(r"^(?:\.\.?/)+", "", cited)):
            if name.endswith("/"):
                for folder in self.folders:
                    if folder.startswith(RESULTS) and ("/" + folder + "/").endswith("/" + name):
                        out |= {f for f in self.files if f.startswith(folder + "/")}
            else:
                out |= {f for f in self.files if f.endswith("/" + name) or f == name
                        or "*" in name and fnmatch.fnmatch(f, "*/" + name)}
        self._resolved[cited] = sorted(out)
        return self._resolved[cited]

    def holder(self, files: Sequence[str], fig: Figure) -> str | None:
        """The first of these recordings that holds the figure at its precision (None: none does). A measure is
        any value that rounds to it, in any unit a recording keeps; a count is an integer held as it is, and
        where a text recording writes numbers followed by the figure's noun ("3 failed"), only those."""
        number, unit = fig.number, fig.unit
        half = 1e-9 if unit == "count" else 0.5 * 10.0 ** -fig.decimals * (1 + 1e-9)
        family, base = FAMILY[unit]
        for name in files:
            values = self.values(name)
            counted = [values[f"count:{n}"] for n in fig.nouns if f"count:{n}" in values]
            if unit == "count" and counted:
                if any(_any_within(v, number - half, number + half) for v in counted):
                    return name
                continue
            for kept in ("", "json:" + family):
                if kept in values and any(_any_within(values[kept], (number - half) / k, (number + half) / k)
                                          for k in SCALES[unit]):
                    return name
            if family in values and _any_within(values[family], (number - half) * base, (number + half) * base):
                return name
        return None


def _expand_braces(name: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    return [x for part in m.group(1).split(",") for x in _expand_braces(name[:m.start()] + part + name[m.end():])]


# ---- figures -------------------------------------------------------------------------------------------

_NUM = r"(?<![\w.,/#@$\\])(?<![A-Za-z]-)(" + NUMBER + r")(?!\d|\.\d|,\d)"
_GAP = r"[ \t]*\n?[ \t]*"  # a figure may be split over one line break
_MIN_S = re.compile(_NUM + _GAP + r"min(?:utes?)?(?=\s)" + _GAP + "(" + NUMBER + r")" + _GAP + r"(?:seconds?|s)(?!\w)")
_UNIT_FIG = re.compile(_NUM + r"(?:" + _GAP + r"(" + UNIT + r")(?!\w)|(x|×)(?!\w))")
_COUNT_FIG = re.compile(_NUM + _GAP + r"(?:(?!\d)([\w-]+)" + _GAP + r")?(?:" + "|".join(COUNT_NOUNS)
                        + r")(?:\(s\))?(?!\w)")
_MANY = {"thousand": 3, "million": 6, "billion": 9}
_OF_FIG = re.compile(_NUM + _GAP + r"of" + _GAP + r"(?:the" + _GAP + r")?(" + NUMBER + r")(?!\d|\.\d|,\d)")
_BARE = re.compile(_NUM + r"(?!\w)")
# what joins a bare number to the figure after it, in whose unit it is: "50 to 57 µs", "4.51, 5.37 s", "6-10 µs"
_JOINT = re.compile(r"[ \t]*\n?[ \t]*(?:to|and|or|against)[ \t]*\n?[ \t]*|[ \t]*(?:->|→|/)[ \t]*\n?[ \t]*"
                    r"|,[ \t]*\n?[ \t]*|[-–]")


@dataclass(frozen=True)
class Figure:
    """One figure of the prose: where it is, what it says, and the unit its number is in."""

    start: int
    end: int
    text: str  # as written, whitespace folded
    number: float
    decimals: int
    unit: str
    nouns: tuple[str, ...] = ()  # a count's words ("60 traced runs": traced, run)

    def edited(self, step: int) -> Figure | None:
        """The same figure with its last digit moved by step (None where that would go below zero)."""
        number = round(self.number + step * 10.0 ** -self.decimals, self.decimals)
        return None if number < 0 else dataclasses.replace(self, number=number)


def fold(text: str) -> str:
    """Text as read: emphasis gone, every run of white space one space."""
    return re.sub(r"\s+", " ", text.replace("*", " ")).strip()


def _parse(number: str) -> tuple[float, int]:
    digits = number.replace(",", "")
    return float(digits), len(digits.split(".")[1]) if "." in digits else 0


def _labelled(text: str, start: int) -> bool:
    before = re.search(r"([\w-]+)[ \t]*\n?[ \t]*$", text[max(0, start - 40):start])
    return before is not None and before.group(1).lower() in LABELS


def figures(masked: str, start: int = 0, end: int | None = None) -> list[Figure]:
    """The figures of masked prose between start and end (offsets kept)."""
    part = masked[:len(masked) if end is None else end]
    found: dict[int, Figure] = {}

    def free(s: int, e: int) -> bool:
        return not any(f.start < e and s < f.end for f in found.values()) and not _labelled(part, s)

    def add(s: int, e: int, number: str, unit: str, value: tuple[float, int] | None = None) -> None:
        if free(s, e):
            words = tuple(noun(w) for w in re.findall(r"[a-z][\w-]*", part[s:e].replace("(s)", "")))
            words = words if unit == "count" else ()
            found[s] = Figure(s, e, fold(part[s:e]), *(value or _parse(number)), unit, words)

    for m in _MIN_S.finditer(part, start):
        (minutes, _), (seconds, decimals) = _parse(m.group(1)), _parse(m.group(2))
        add(m.start(), m.end(), "", "s", (minutes * 60 + seconds, decimals))
    for m in _UNIT_FIG.finditer(part, start):
        unit = m.group(2) or m.group(3)
        add(m.start(), m.end(), m.group(1), _SPELLED.get(unit, unit))
    for m in _COUNT_FIG.finditer(part, start):
        value, decimals = _parse(m.group(1))
        shift = _MANY.get((m.group(2) or "").lower(), 0)  # "10 million calls"
        rate = re.match(r"[ \t]*\n?[ \t]*(?:a|per)[ \t]*\n?[ \t]*second|/s\b", part[m.end():])  # handoffs a second
        add(m.start(), m.end(), "", "rate" if rate else "count", (value * 10**shift, decimals - shift))
    for m in _OF_FIG.finditer(part, start):
        if not _labelled(part, m.start(1)):  # "item 2 of 3" names an item
            add(m.start(1), m.end(1), m.group(1), "count")
            add(m.start(2), m.end(2), m.group(2), "count")
    # a bare number joined to the figure after it is in that figure's unit; right to left, so chains hold
    for m in reversed(list(_BARE.finditer(part, start))):
        nxt = min((f for f in found.values() if f.start >= m.end()), key=lambda f: f.start, default=None)
        if nxt is not None and free(m.start(), m.end()):
            joint = part[m.end():nxt.start]
            if _JOINT.fullmatch(joint) and not (nxt.unit == "count" and "," in joint):
                add(m.start(), m.end(), m.group(1), nxt.unit)
    return sorted(found.values(), key=lambda f: f.start)


# ---- the document: masked text, places, marks, citations ------------------------------------------------

_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_CODE = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK = re.compile(r"\]\([^)\s]*\)|https?://\S+")
_NUMBERING = re.compile(r"^([ \t]*(?:#{1,6}[ \t]+|[-*+][ \t]+|\|[ \t]*)?)(\d+(?:\.\d+)*\.)(?=[ \t])", re.M)
_HEADING = re.compile(r"^#{1,6}[ \t]")
_ITEM = re.compile(r"^[ \t]{0,3}(?:[-*+]|\d+\.)[ \t]")
_CITED = re.compile(r"(?<![\w/.{}-])((?:\.\.?/)*[\w{},*.-]+(?:/[\w{},*.-]+)*"
                    r"(?:\.(?:json|sarif|txt|tsv|log|xml)|\.\*|/))(?![\w-])")
_MARK = re.compile(r"<!--\s*(not recorded|ambiguous)\b(.*?)-->", re.S)


def _blank(text: str, spans: Sequence[tuple[int, int]]) -> str:
    chars = list(text)
    for s, e in spans:
        chars[s:e] = ["\n" if c == "\n" else " " for c in chars[s:e]]
    return "".join(chars)


@dataclass
class Mark:
    """A mark: its kind, the figures it names as written, each group's reason, and what is wrong with it."""

    start: int
    kind: str  # "not recorded", or "ambiguous": recorded, beside values an edit of it would still meet
    entries: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    problem: str | None = None


def _last_parenthesis(group: str) -> tuple[str, str]:
    """A mark's group split into its figures and its reason: the parenthesis that ends it."""
    if not group.endswith(")"):
        return group, ""
    depth = 0
    for i in range(len(group) - 1, -1, -1):
        depth += (group[i] == ")") - (group[i] == "(")
        if depth == 0:
            return group[:i], group[i + 1:-1]
    return group, ""


def parse_mark(kind: str, body: str, start: int) -> Mark:
    """A mark's body after its kind: `: FIGURE, FIGURE (REASON); FIGURE (REASON)`."""
    mark = Mark(start, kind)
    groups, depth, begin = [], 0, 1
    for i, c in enumerate(body):
        depth += (c == "(") - (c == ")")
        if c == ";" and depth == 0:
            groups.append(body[begin:i])
            begin = i + 1
    for group in [*groups, body[begin:]] if body.startswith(":") else [body]:
        figs, reason = _last_parenthesis(group.strip())
        if not body.startswith(":") or not figs.strip() or not reason.strip():
            mark.problem = f"a mark reads <!-- {kind}: FIGURE, FIGURE (REASON); FIGURE (REASON) -->, not {group!r}"
            return mark
        mark.entries += [fold(e) for e in re.split(r",\s+", figs) if e.strip()]
        mark.reasons.append(fold(reason))
    return mark


@dataclass
class Place:
    """A table row or a paragraph (a list item, a heading): its figures, its marks, and the names cited by
    its row, its table, its section and its document, nearest first."""

    start: int
    end: int
    kind: str  # "row" or "paragraph"
    figures: list[Figure]
    marks: list[Mark]
    cited: list[list[str]]


@dataclass
class Document:
    """A document read for its figures."""

    name: str
    text: str
    masked: str  # the text with code, comments, link targets and emphasis blanked, offsets kept
    places: list[Place]

    def line(self, offset: int) -> int:
        """The 1-based line of an offset."""
        return self.text.count("\n", 0, offset) + 1


def mask(prose: str) -> tuple[str, str, str]:
    """Prose (fenced code already blanked) as it is, as a reader sees it (comments blanked: where citations
    are read), and with everything that holds no figure blanked too: code, link targets, numbering, emphasis.
    Offsets are kept."""
    seen = _blank(prose, [m.span() for m in _COMMENT.finditer(prose)])
    masked = _blank(seen, [m.span() for m in _CODE.finditer(seen)])
    masked = _blank(masked, [m.span() for m in _LINK.finditer(masked)])
    masked = _blank(masked, [m.span(2) for m in _NUMBERING.finditer(masked)]).replace("*", " ")
    return prose, seen, masked


def _place(prose: str, masked: str, kind: str, s: int, e: int, cited: list[list[str]]) -> Place:
    marks = [parse_mark(m.group(1), m.group(2), m.start()) for m in _MARK.finditer(prose, s, e)]
    return Place(s, e, kind, figures(masked, s, e), marks, cited)


def reread(place: Place, text: str) -> tuple[Place, str]:
    """A place read again from its own (edited) text, its citations as they were: the place, its masked text."""
    prose, _, masked = mask(text)
    return _place(prose, masked, place.kind, 0, len(text), place.cited), masked


def runs(place: Place, masked: str, entry: str) -> list[list[Figure]]:
    """The runs of a place's figures, one's start to one's end, that read as a mark's entry."""
    figs = place.figures
    return [[f for f in figs[i:] if f.end <= last.end] for i, first in enumerate(figs) for last in figs[i:]
            if fold(masked[first.start:last.end]) == entry]


def assign(place: Place, masked: str) -> tuple[dict[int, str], list[tuple[int, str]]]:
    """Each entry of the place's marks names one run of its figures, none named twice (the longest entries
    first, each the first run left): the kind of mark on each figure named, by its start, and the entries left
    naming nothing, with their mark's offset."""
    kinds: dict[int, str] = {}
    left: list[tuple[int, str]] = []
    entries = [(mark, entry) for mark in place.marks for entry in mark.entries]
    for mark, entry in sorted(entries, key=lambda me: -len(me[1])):
        run = next((r for r in runs(place, masked, entry) if not any(f.start in kinds for f in r)), None)
        if run is None:
            left.append((mark.start, entry))
        else:
            kinds |= {f.start: mark.kind for f in run}
    return kinds, left


def read(name: str, text: str) -> Document:
    """Blank what holds no figures, split into sections, paragraphs and rows, find figures, marks, citations."""
    lines = text.split("\n")
    at = [0]
    for line in lines:
        at.append(at[-1] + len(line) + 1)
    fenced, inside = [], False
    for i, line in enumerate(lines):
        if _FENCE.match(line) or inside:
            fenced.append((at[i], at[i] + len(line)))
        inside ^= bool(_FENCE.match(line))
    prose, seen, masked = mask(_blank(text, fenced))

    def cited(s: int, e: int) -> list[str]:
        return [m.group(1) for m in _CITED.finditer(seen, s, e)]

    def place(kind: str, s: int, e: int, above: list[list[str]]) -> Place:
        return _place(prose, masked, kind, s, e, [cited(s, e), *above])

    def blank(i: int) -> bool:
        return not prose[at[i]:at[i] + len(lines[i])].strip()

    heads = [i for i, line in enumerate(lines) if _HEADING.match(line) and not blank(i)]
    bounds = sorted({0, *heads, len(lines)})
    places: list[Place] = []
    document = cited(0, len(text))
    for a, b in zip(bounds, bounds[1:], strict=False):
        section = [cited(at[a], at[b] - 1), document]
        if a in heads:
            places.append(place("paragraph", at[a], at[a] + len(lines[a]), section))
            a += 1
        block: list[int] = []
        for i in range(a, b + 1):
            if i < b and not blank(i):
                block.append(i)
                continue
            if not block:
                continue
            s, e = at[block[0]], at[block[-1]] + len(lines[block[-1]])
            if all(lines[j].lstrip().startswith("|") for j in block):
                places += [place("row", at[j], at[j] + len(lines[j]), [cited(s, e), *section]) for j in block]
            elif _ITEM.match(lines[block[0]]):
                items = [j for j in block if _ITEM.match(lines[j])] + [block[-1] + 1]
                places += [place("paragraph", at[j], at[k - 1] + len(lines[k - 1]), section)
                           for j, k in zip(items, items[1:], strict=False)]
            else:
                places.append(place("paragraph", s, e, section))
            block = []
    return Document(name, text, masked, places)
