"""Text that fits the terminal it is shown on: its width, word wrapping, columns, and colour for verdicts.

- Width: ``COLUMNS`` when it is a number, else the terminal's own size when the output is one, else 80;
  held to 20..1000 columns (a larger number is 1000, not ignored; below 20 no layout is readable, and a
  COLUMNS below 20 is said so on standard error, once, with the width used).
- Colour: only on a terminal, never with ``NO_COLOR`` set to a non-empty value (https://no-color.org) or
  ``TERM=dumb``; a pipe, a file or ``-o`` gets plain text.
- Wrapping is at word boundaries; a word longer than its column is folded. Widths are counted in
  terminal cells (a wide East Asian character is two, a combining mark none), so every line fits.
  The fold streams (``iter_wrap``): each line costs the characters it holds, whatever follows it, so a
  result file from another runner holding one string of 64 MiB is laid out in time linear in its size.

Text reaching these functions is already escaped for a terminal (``escape.terminal``): colour codes are
added here, after wrapping, and never counted in a width.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, islice, zip_longest
from typing import IO, Any

DEFAULT_WIDTH = 80
MIN_WIDTH, MAX_WIDTH = 20, 1000
ELLIPSIS = "…"
_TOLD_NARROW: set[int] = set()  # widths below MIN_WIDTH already said so (once each per process)

# SGR codes per verdict: fails and error stand out (bold white on red), the rest are quiet.
VERDICT_SGR = {"holds": "32", "fails": "1;97;41", "error": "1;97;41", "changed": "33", "observed": "36",
               "skipped": "2", "unjudged": "2"}
STYLE_SGR = {"bold": "1", "dim": "2", "red": "31", **VERDICT_SGR}


@dataclass(frozen=True)
class Screen:
    """Where text is shown: how many columns it has and whether it takes colour."""

    width: int = DEFAULT_WIDTH
    colour: bool = False

    def paint(self, text: str, style: str | None) -> str:
        """``text`` in ``style`` (a verdict or bold, dim, red) when this screen takes colour; as is otherwise."""
        code = STYLE_SGR.get(style or "")
        if not self.colour or not code or not text:
            return text
        return f"\x1b[{code}m{text}\x1b[0m"


def _env_width(env: Mapping[str, str]) -> int | None:
    """COLUMNS as a number of columns, None when it is not a positive number (any length: 100000 is wide)."""
    text = env.get("COLUMNS", "").strip()
    if not (text.isascii() and text.isdigit()) or not text.strip("0"):
        return None
    return MAX_WIDTH if len(text.lstrip("0")) > 4 else int(text)  # int() of thousands of digits refuses


def screen_for(stream: IO[Any] | None, env: Mapping[str, str] | None = None) -> Screen:
    """The screen ``stream`` shows: its width (COLUMNS, the terminal's size, or 80) and whether it takes colour."""
    env = os.environ if env is None else env
    tty = False
    size = None
    try:
        if stream is not None and stream.isatty():
            tty = True
            size = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        pass
    width = _env_width(env) or size or DEFAULT_WIDTH
    if width < MIN_WIDTH and width not in _TOLD_NARROW:
        _TOLD_NARROW.add(width)
        source = f"COLUMNS={width}" if _env_width(env) else f"the terminal's {width} columns"
        try:
            sys.stderr.write(f"ctxlab: {source} is narrower than the narrowest layout: laid out at {MIN_WIDTH} "
                             f"columns\n")
        except (OSError, ValueError, AttributeError):  # no standard error to tell: the layout goes on
            pass
    colour = tty and not env.get("NO_COLOR") and env.get("TERM") != "dumb"  # no-color.org: a non-empty value
    return Screen(max(MIN_WIDTH, min(MAX_WIDTH, width)), colour)


def char_width(char: str) -> int:
    """Terminal cells one character takes: 2 for wide East Asian forms, 0 for combining marks, else 1."""
    if char.isascii():
        return 1
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


class _Widths(dict):
    """char_width of each character met, remembered (at most WIDTHS_KEPT of them)."""

    def __missing__(self, char: str) -> int:
        if len(self) >= WIDTHS_KEPT:
            self.clear()
        width = self[char] = char_width(char)
        return width


WIDTHS_KEPT = 1 << 16
_WIDTHS = _Widths()


def text_width(text: str) -> int:
    """Terminal cells a line takes."""
    if text.isascii():
        return len(text)
    return sum(map(_WIDTHS.__getitem__, text))


_SPACES = re.compile(r"\s+")  # what str.split() splits at (both use Unicode's whitespace)
_SPACE = re.compile(r"\s")
_ASCII_SPACES = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"  # the ASCII whitespace but the space (str.isspace)
CHUNK = 1 << 16  # characters of a paragraph made single-spaced at a time


def _marked(head: str) -> str:
    """A piece of a word too long for its line, cut after a - . _ or / near its end (CUDA_ERROR_ /
    INVALID_VALUE) where there is one."""
    cut = max(head.rfind("-"), head.rfind("."), head.rfind("_"), head.rfind("/"))
    return head[: cut + 1] if cut >= len(head) // 3 else head


def _single_spaced(text: str, start: int, stop: int) -> Iterator[str]:
    """``text[start:stop]`` with its spaces single and none at either end, in pieces of about CHUNK
    characters that each end a word (joined by one space, they are the whole): never a copy of a huge
    paragraph split into millions of words."""
    at = start
    while at < stop:
        end = stop
        if stop - at > CHUNK:
            space = _SPACE.search(text, at + CHUNK, stop)
            end = space.start() if space else stop
        piece = text[at:end]
        if piece.isascii() and "  " not in piece and not any(c in piece for c in _ASCII_SPACES):
            piece = piece.strip(" ")  # already single-spaced: the common case, 7 times as fast as the regex
        else:
            piece = _SPACES.sub(" ", piece).strip()
        if piece:
            yield piece
        at = end


def _lines(pieces: Iterator[str], width: int) -> Iterator[str]:
    """A paragraph (its single-spaced pieces) as lines of at most ``width`` cells: each the most whole
    words that fit, a word wider than a line folded and its rest starting the next. Each step reads only
    the characters of the line it makes: linear, however long a word."""
    buf, at = "", 0

    def grow() -> bool:
        nonlocal buf
        piece = next(pieces, None)
        if piece is None:
            return False
        buf = f"{buf} {piece}" if buf else piece
        return True

    while True:
        if len(buf) - at <= width:  # refill: what is left of the buffer is at most a line
            buf, at = buf[at:], 0
            while len(buf) <= width and grow():
                pass
            if not buf:
                return
        if buf.isascii() or buf[at:at + width + 1].isascii():  # a cell a character: the line is a slice
            if len(buf) - at <= width:
                yield buf[at:]
                return
            space = buf.rfind(" ", at, at + width + 1)
            if space > at:
                yield buf[at:space]
                at = space + 1
            else:
                piece = _marked(buf[at:at + width])
                yield piece
                at += len(piece)
            continue
        look = width + 1  # characters to measure: more where zero-width marks run on
        while True:
            window = buf[at:at + look]
            fits = bisect_right(list(accumulate(map(_WIDTHS.__getitem__, window))), width)
            if fits < len(window):
                break
            if at + look >= len(buf):
                if not grow():  # the rest of the paragraph fits
                    yield buf[at:]
                    return
            else:
                look *= 2
        stop = at + max(fits, 1)  # a character wider than the line still takes one
        if stop >= len(buf) and not grow():
            yield buf[at:]
            return
        space = buf.rfind(" ", at, stop)
        if buf[stop] == " " or space > at:  # a whole word or more fits: break at the last space
            cut = stop if buf[stop] == " " else space
            yield buf[at:cut]
            at = cut + 1
        else:
            piece = _marked(buf[at:stop])
            yield piece
            at += len(piece)


def iter_wrap(text: str, width: int) -> Iterator[str]:
    """``text`` as lines of at most ``width`` cells, broken between words (a newline breaks too), one line
    at a time."""
    width = max(1, width)
    start = 0
    while True:
        stop = text.find("\n", start)
        end = len(text) if stop < 0 else stop
        lines = _lines(_single_spaced(text, start, end), width)
        yield next(lines, "")  # an empty paragraph is an empty line
        yield from lines
        if stop < 0:
            return
        start = stop + 1


def wrap(text: str, width: int) -> list[str]:
    """``text`` as lines of at most ``width`` cells, broken between words (a newline breaks too)."""
    return list(iter_wrap(text, width))


def title(text: str, screen: Screen) -> list[str]:
    """A title in bold, wrapped to the screen (a lab's name alone may be wider than a narrow one)."""
    return [screen.paint(line, "bold") for line in wrap(text, screen.width)]


def clip(text: str, width: int, lines: int | None = 1) -> list[str]:
    """``text`` wrapped at ``width`` and cut to ``lines`` lines, the cut marked with an ellipsis (None: all)."""
    if lines is None:
        return wrap(text, width)
    wrapped = list(islice(iter_wrap(text, width), lines + 1))  # one more tells whether there is more
    if len(wrapped) <= lines:
        return wrapped
    kept = wrapped[:lines]
    last = kept[-1]
    if text_width(last) + 1 > width:  # room for the ellipsis: drop the last word, or a character of a long one
        cut = last.rfind(" ")
        last = last[:cut] if cut > width // 2 else last[:-1]
        while last and text_width(last) + 1 > width:
            last = last[:-1]
    kept[-1] = last.rstrip() + ELLIPSIS
    return kept


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` cells."""
    return text + " " * max(0, width - text_width(text))


@dataclass(frozen=True)
class Cell:
    """One cell of a grid: its text (escaped), its style, and how many lines it may take (None: all)."""

    text: str
    style: str | None = None
    lines: int | None = None


def fit(natural: Sequence[int], width: int, gap: int = 2, floor: int = 4) -> list[int]:
    """Column widths that add up (with gaps) to at most ``width``: every column is capped at the one width
    that fills the room, so the narrow columns keep their natural width and the wide ones share the rest."""
    room = width - gap * (len(natural) - 1)
    widths = [max(1, n) for n in natural]
    if sum(widths) <= room:
        return widths
    low, high = floor, max(widths)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(w, middle) for w in widths) <= room:
            low = middle
        else:
            high = middle - 1
    return [min(w, low) for w in widths]


def _cell_lines(cell: Cell, width: int) -> Iterable[str]:
    return iter_wrap(cell.text, width) if cell.lines is None else clip(cell.text, width, cell.lines)


def iter_grid(rows: Iterable[Sequence[Cell]], widths: Sequence[int], screen: Screen, gap: int = 2) -> Iterator[str]:
    """Rows of cells side by side, each cell wrapped (and clipped) in its column, coloured after wrapping, one
    line at a time (a cell of a million lines is never held as a list)."""
    spacer = " " * gap
    for row in rows:
        last = len(row) - 1
        for texts in zip_longest(*(_cell_lines(cell, widths[i]) for i, cell in enumerate(row)), fillvalue=""):
            parts = [screen.paint(text, cell.style) + (" " * max(0, widths[i] - text_width(text)) if i < last else "")
                     for i, (text, cell) in enumerate(zip(texts, row, strict=True))]
            yield spacer.join(parts).rstrip()


def grid(rows: Sequence[Sequence[Cell]], widths: Sequence[int], screen: Screen, gap: int = 2) -> list[str]:
    """Rows of cells side by side, each cell wrapped (and clipped) in its column, coloured after wrapping."""
    return list(iter_grid(rows, widths, screen, gap))


def natural_widths(rows: Sequence[Sequence[Cell]], cap: int = 60) -> list[int]:
    """Each column's widest cell (in cells), at most ``cap``."""
    if not rows:
        return []
    widths = [0] * max(len(row) for row in rows)
    for row in rows:
        for i, cell in enumerate(row):
            widest = max((text_width(line) for line in cell.text.split("\n")), default=0)
            widths[i] = min(cap, max(widths[i], widest))
    return widths


def grid_or_stacked(rows: Sequence[Sequence[Cell]], natural: Sequence[int], screen: Screen, floor: int = 4,
                    gap: int = 2) -> list[str]:
    """``rows`` (the first: the headers) side by side where their columns fit the screen at ``floor`` cells
    or more each; else stacked, as the claim table on a narrow screen: each row's first cell on a line of its
    own, every other cell under it as ``header: value``, wrapped, so that nothing is wider than the screen."""
    widths = fit(natural, screen.width, gap, floor)
    if sum(widths) + gap * (len(widths) - 1) <= screen.width:
        return grid(rows, widths, screen, gap)
    headers, *body = rows
    out: list[str] = []
    for row in body:
        first, *rest = row
        out += [screen.paint(line, first.style) for line in wrap(first.text, screen.width)]
        for header, cell in zip(headers[1:], rest, strict=False):
            if cell.text:
                out += ["  " + screen.paint(line, cell.style) for line in
                        wrap(f"{header.text}: {cell.text}", max(1, screen.width - 2))]
    return out
