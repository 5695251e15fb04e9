"""Text that fits the terminal it is shown on: its width, word wrapping, columns, and colour for verdicts.

- Width: ``COLUMNS`` when it is a number, else the terminal's own size when the output is one, else 80.
- Colour: only on a terminal, never with ``NO_COLOR`` set to a non-empty value (https://no-color.org) or
  ``TERM=dumb``; a pipe, a file or ``-o`` gets plain text.
- Wrapping is at word boundaries; a word longer than its column is folded. Widths are counted in
  terminal cells (a wide East Asian character is two, a combining mark none), so every line fits.

Text reaching these functions is already escaped for a terminal (``escape.terminal``): colour codes are
added here, after wrapping, and never counted in a width.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

DEFAULT_WIDTH = 80
MIN_WIDTH, MAX_WIDTH = 40, 1000
ELLIPSIS = "…"

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
    text = env.get("COLUMNS", "").strip()
    if text.isascii() and text.isdigit() and len(text) < 6:
        return int(text)
    return None


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
    colour = tty and not env.get("NO_COLOR") and env.get("TERM") != "dumb"  # no-color.org: a non-empty value
    return Screen(max(MIN_WIDTH, min(MAX_WIDTH, width)), colour)


def char_width(char: str) -> int:
    """Terminal cells one character takes: 2 for wide East Asian forms, 0 for combining marks, else 1."""
    if char.isascii():
        return 1
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def text_width(text: str) -> int:
    """Terminal cells a line takes."""
    if text.isascii():
        return len(text)
    return sum(char_width(c) for c in text)


def _fold(word: str, width: int) -> list[str]:
    """A word longer than ``width`` in pieces that each fit, broken after a - . _ or / where one is near the
    end of a piece (CUDA_ERROR_ / INVALID_VALUE), else at the width."""
    pieces: list[str] = []
    while text_width(word) > width:
        head, used = "", 0
        for char in word:
            w = char_width(char)
            if used + w > width and head:
                break
            head += char
            used += w
        cut = max(head.rfind(mark) for mark in "-._/")
        if cut >= len(head) // 3:
            head = head[: cut + 1]
        pieces.append(head)
        word = word[len(head):]
    return [*pieces, word] if word else pieces


def wrap(text: str, width: int) -> list[str]:
    """``text`` as lines of at most ``width`` cells, broken between words (a newline breaks too)."""
    width = max(1, width)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line, used = "", 0
        for word in paragraph.split():
            w = text_width(word)
            if w > width:
                if line:
                    lines.append(line)
                *whole, rest = _fold(word, width)
                lines += whole
                line, used = rest, text_width(rest)
                continue
            if line and used + 1 + w > width:
                lines.append(line)
                line, used = "", 0
            line = f"{line} {word}" if line else word
            used += w + (1 if used else 0)
        lines.append(line)
    return lines or [""]


def clip(text: str, width: int, lines: int | None = 1) -> list[str]:
    """``text`` wrapped at ``width`` and cut to ``lines`` lines, the cut marked with an ellipsis (None: all)."""
    wrapped = wrap(text, width)
    if lines is None or len(wrapped) <= lines:
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


def grid(rows: Sequence[Sequence[Cell]], widths: Sequence[int], screen: Screen, gap: int = 2) -> list[str]:
    """Rows of cells side by side, each cell wrapped (and clipped) in its column, coloured after wrapping."""
    out: list[str] = []
    spacer = " " * gap
    for row in rows:
        wrapped = [clip(cell.text, widths[i], cell.lines) for i, cell in enumerate(row)]
        height = max(len(lines) for lines in wrapped)
        for n in range(height):
            parts = []
            for i, cell in enumerate(row):
                text = wrapped[i][n] if n < len(wrapped[i]) else ""
                padding = " " * max(0, widths[i] - text_width(text)) if i < len(row) - 1 else ""
                parts.append(screen.paint(text, cell.style) + padding)
            out.append(spacer.join(parts).rstrip())
    return out


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
