"""Result JSON written as it is made: the text of ``record.dumps``, character for character, in chunks.

``json.dumps(indent=2)`` of a large result builds every observation's dict, then every piece of text
(the indenting encoder is pure Python and keeps its pieces in one list), then the whole string: about
ten times the file's size in memory. Here each run is encoded without its observations, with a
placeholder where their list goes, and the observations follow one at a time, indented to the depth the
placeholder had, in chunks of ``BATCH``: memory stays near one chunk whatever the file's size. The text
around them is handed on in pieces of ``PIECE`` characters: a run may hold one string of 64 MiB (six
times that as JSON escapes), and a slice of it whole is one more copy of it.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Callable, Iterator, Sequence

from ctxlab.records.model import LabResult
from ctxlab.records.schema import SCHEMA

BATCH = 2000  # observations per chunk
PIECE = 1 << 20  # characters of the text around the observations per chunk


def _pieces(text: str, start: int, stop: int) -> Iterator[str]:
    """``text[start:stop]`` in slices of at most PIECE characters."""
    for at in range(start, stop, PIECE):
        yield text[at:min(at + PIECE, stop)]


def _observation_text(pad: str) -> Callable[[dict], str]:
    """An encoder of one observation's dict as ``json.dumps(indent=2)`` writes it ``pad`` deeper."""
    encode = json.JSONEncoder(indent=2).encode
    newline = "\n" + pad
    return lambda data: encode(data).replace("\n", newline)  # strings hold no raw newline: JSON escapes it


def _runs_text(runs: Sequence[LabResult], as_list: bool) -> tuple[str, list[str]]:
    """The document with each run's observations as one placeholder string, and the placeholders (a
    random token, longer than anything a run could hold by chance)."""
    marks = [f"ctxlab-observations-{secrets.token_hex(16)}-{index}" for index in range(len(runs))]
    bodies = []
    for run, mark in zip(runs, marks, strict=True):
        body = dataclasses.replace(run, observations=()).to_dict()
        body["observations"] = [mark]
        bodies.append(body)
    if len(runs) == 1 and not as_list:
        return json.dumps(bodies[0], indent=2), marks
    return json.dumps({"schema": SCHEMA, "runs": bodies}, indent=2), marks


def iter_dumps(runs: Sequence[LabResult], as_list: bool = False) -> Iterator[str]:
    """``record.dumps(runs, as_list)`` in chunks (joined, the same text)."""
    from ctxlab.records.model import dumps

    text, marks = _runs_text(runs, as_list)
    if any(text.count(json.dumps(mark)) != 1 for mark in marks):  # the token is in the data: never by chance
        yield dumps(list(runs), as_list)
        return
    rest = 0
    for run, mark in zip(runs, marks, strict=True):
        at = text.index(json.dumps(mark), rest)
        start = text.rindex("[", rest, at)  # the list's "[", then a newline and the items' indent
        pad = text[start + 2:at]
        yield from _pieces(text, rest, start)
        rest = at + len(json.dumps(mark))
        if not run.observations:  # as json.dumps writes an empty list
            yield "[]"
            rest = text.index("]", rest) + 1
            continue
        encode = _observation_text(pad)
        items = run.observations
        for first in range(0, len(items), BATCH):
            chunk = ("[\n" + pad if first == 0 else ",\n" + pad) + (",\n" + pad).join(
                encode(o.to_dict()) for o in items[first:first + BATCH])
            yield from _pieces(chunk, 0, len(chunk))  # the writer encodes a piece at a time, not a whole batch
    yield from _pieces(text, rest, len(text))
