"""Reading result files safely: they are data from other machines, so any bytes may arrive.

Every failure is a ``ResultFileError`` with one line naming the file: too large
(the limit bounds what is read into memory), not UTF-8, not JSON, nested deeper
than the schema allows, or the wrong shape (``ctxlab.records.shapes``).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from typing import Any, BinaryIO

from ctxlab.defaults import DEFAULT_MAX_BYTES
from ctxlab.errors import OptionError
from ctxlab.records.model import LabResult, ResultFileError
from ctxlab.records.shapes import MAX_DEPTH, runs_from_document


def size_text(n: int) -> str:
    """A byte count as people read it: 64 MiB, 3.0 GiB, 512 bytes."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


LIMIT_HINT = "max_bytes raises it"  # the API's parameter; the CLI names its --max-size instead


def check_limit(max_bytes: object) -> int:
    """``max_bytes`` as a size limit: a whole number from 1 byte to 1 TiB (a result is read whole)."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or not 0 < max_bytes <= 2**40:
        raise OptionError(f"max_bytes: {max_bytes!r} is not a size in bytes from 1 to 2**40 (1 TiB)")
    return max_bytes


CHUNK = 1 << 20  # what one read asks of a pipe or device, which has no size to go by


def read_bounded(path: str, max_bytes: int = DEFAULT_MAX_BYTES, limit_hint: str = LIMIT_HINT,
                 head_check: Callable[[bytes], None] | None = None) -> bytes:
    """The file's bytes, refusing more than ``max_bytes`` (checked on the size, then on what is read);
    ``limit_hint`` says in the refusal how to raise the limit; ``head_check`` sees the first bytes before the
    rest is read (and may refuse them). Never asks for more room than the file has:
    a regular file is read as its size says (and a byte more, to see it grew), a pipe or device in chunks,
    so that any limit up to 1 TiB is only a limit."""
    max_bytes = check_limit(max_bytes)
    if not path:
        raise ResultFileError("'': empty file name: give the path of a result file")
    limit = f"larger than the limit of {size_text(max_bytes)} ({limit_hint})"
    try:
        with open(path, "rb", buffering=0) as handle:  # unbuffered: a read's buffer is what it asks for
            info = os.fstat(handle.fileno())
            if info.st_size > max_bytes:
                raise ResultFileError(f"{path}: {size_text(info.st_size)} is {limit}")
            regular = stat.S_ISREG(info.st_mode)
            sized = regular and info.st_size > 0  # /proc's files say 0: past their first byte, read as a pipe
            if head_check is not None and regular:  # a look at its first bytes, before reading all of it
                head_check(os.pread(handle.fileno(), HEAD_BYTES, 0))
            data = _read_at_most(handle, max_bytes + 1, info.st_size + 1 if regular else CHUNK, sized,
                                 None if regular else head_check)
    except IsADirectoryError:
        raise ResultFileError(f"{path}: cannot read (is a directory)") from None
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise ResultFileError(f"{path}: more than {size_text(max_bytes)}, {limit}")
    return data


HEAD_BYTES = 4096  # read first: a file whose first bytes cannot begin JSON is refused before the rest is read
JSON_STARTS = frozenset(b' \t\r\n{["-0123456789tfn\xef')  # whitespace, a value's first byte, a UTF-8 BOM's


def refuse_what_is_not_json(path: str, head: bytes) -> None:
    """A file whose first bytes no JSON document begins with (a disk image, a file of NUL bytes) is no result:
    refused at once, not after reading gigabytes of it."""
    first = next((b for b in head if b not in b" \t\r\n"), None)
    if head and (head[0] not in JSON_STARTS or first is not None and first not in JSON_STARTS):
        shown = first if first is not None else head[0]
        raise ResultFileError(f"{path}: not a result file: it begins with byte {shown:#04x}, which no JSON "
                              f"document begins with")


def _read_at_most(handle: BinaryIO, bound: int, first: int, sized: bool,
                  head_check: Callable[[bytes], None] | None = None) -> bytes:
    """Up to ``bound`` bytes until end of file: a first read of ``first`` bytes, then reads of ``CHUNK`` (a file
    that grew, a pipe), none asking for more than is left of ``bound``. A ``sized`` (regular) file gives less
    than asked only at its end, so that ends it without a further read and its buffer."""
    parts: list[bytes] = []
    got, want = 0, first
    while got < bound:
        asked = min(want, bound - got)
        piece = handle.read(asked)
        if not piece:
            break
        if head_check is not None and not parts:
            head_check(piece[:HEAD_BYTES])
        parts.append(piece)
        got += len(piece)
        if sized and len(piece) < asked:
            break
        want = CHUNK
    return parts[0] if len(parts) == 1 else b"".join(parts)


# What can open or close a string or a nesting level; everything else is dropped before the depth is counted.
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b'"[]{}')
# A string once only quotes and brackets are left (an unterminated one runs to the end).
_STRING = re.compile(rb'"[^"]*"?')


def nesting_depth(data: bytes) -> int:
    """How deep arrays and objects nest in JSON text, brackets inside strings not counted.

    Linear, and bounded in memory by a copy or two of ``data``: only the escapes ``\\\\`` and ``\\"`` can
    hide a quote, so they go first (left to right, pairing backslashes as a reader does); then all but
    quotes and brackets; then every ``""`` (an empty string, or two strings side by side: either way no
    bracket changes sides); what is left between quotes is the few strings that hold brackets."""
    import numpy as np

    reduced = _without_escaped_quotes(data)
    brackets = _STRING.sub(b"", reduced.replace(b'""', b""))
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1).astype(np.int32)
    return int(np.cumsum(steps, dtype=np.int64).max())


ESCAPES_LOOKED_AT = 1 << 14  # backslashes found one by one; a file with more takes the two replaces


def _without_escaped_quotes(data: bytes) -> bytes:
    """What is left of ``data`` once every ``\\\\`` and then every ``\\"`` is removed (left to right) and then
    all but quotes and brackets. The replaces remove backslashes, which the last step removes anyway, and the
    quotes that end a run of an odd number of backslashes: so those quotes alone are found, from the few
    backslashes a result file has, and the text between them is cut down once, not copied twice first. Past
    ``ESCAPES_LOOKED_AT`` backslashes, the replaces themselves (linear in C, whatever the text)."""
    pieces: list[bytes] = []
    start, at, left = 0, data.find(b"\\"), ESCAPES_LOOKED_AT
    while at >= 0:
        end = at + 1
        while left > 0 and data[end:end + 1] == b"\\":  # the end of this run of backslashes
            end, left = end + 1, left - 1
        left -= 1
        if left <= 0:
            return data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURAL)
        if (end - at) % 2 and data[end:end + 1] == b'"':  # an escaped quote: gone with the text before it kept
            pieces.append(data[start:end].translate(None, _NOT_STRUCTURAL))
            start = end + 1
        at = data.find(b"\\", end)
    pieces.append((data[start:] if start else data).translate(None, _NOT_STRUCTURAL))
    return b"".join(pieces)


MAX_DIGITS = 40  # an integer a record holds (a handle, a count) has at most 20
# Every digit as 1, every other byte as a space: a run of more than MAX_DIGITS ones is where a longer integer
# could be; with none, no integer needs counting and json's own int() reads them all.
_DIGITS_AS_ONES = bytes(0x31 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_TOO_MANY_DIGITS = b"1" * (MAX_DIGITS + 1)


class _NotANumber(ValueError):
    """A number token JSON or ctxlab does not take; the message says which."""


def _refuse_constant(token: str):
    raise _NotANumber(f"{token} is not a number JSON allows")


def _finite_float(token: str) -> float:
    value = float(token)
    if value in (float("inf"), float("-inf")):
        raise _NotANumber(f"{token[:20]} is too large for a number")
    return value


def _bounded_int(token: str) -> int:
    if len(token.lstrip("-")) > MAX_DIGITS:
        raise _NotANumber(f"an integer of {len(token.lstrip('-'))} digits is longer than the {MAX_DIGITS} allowed")
    return int(token)


def decode_json(data: bytes, origin: str) -> Any:
    """Strict UTF-8 JSON without NaN or infinities, nested no deeper than the schema allows."""
    long_digits = _TOO_MANY_DIGITS in data.translate(_DIGITS_AS_ONES)  # else every integer is short
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultFileError(f"{origin}: not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start})") from None
    depth = nesting_depth(data)
    if depth > MAX_DEPTH:
        raise ResultFileError(f"{origin}: nested deeper than the {MAX_DEPTH} levels a result file may have "
                              f"({depth} levels)")
    del data  # the caller passes its bytes on: the text and what it decodes to need the room
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                          parse_int=_bounded_int if long_digits else None)
    except _NotANumber as exc:
        raise ResultFileError(f"{origin}: not JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{origin}: not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:  # a backstop: the depth check above should have refused it
        raise ResultFileError(f"{origin}: nested too deep to read") from None


def load_runs(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES, limit_hint: str = LIMIT_HINT,
              build: Callable[[dict], LabResult] = LabResult.from_dict) -> list[LabResult]:
    """The runs in a result file (schema ctxlab/1), or ResultFileError with one line naming the file;
    ``build`` makes each checked run's record (``shapes.runs_from_document``)."""
    origin = os.fspath(path)
    data = read_bounded(origin, max_bytes, limit_hint, head_check=lambda head: refuse_what_is_not_json(origin, head))
    return runs_from_document(decode_json(data, origin), origin, build)

