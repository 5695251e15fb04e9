"""Evidence as drift and the fleet view compare it: what the run decided, without the values of this one run.

Two runs of the same code on the same machine must read the same; a change of verdict, of an error's name or
of an outcome's class must still read differently. ``normalize`` therefore blanks, in this order:

- handles, addresses and pointers: ``0x7f41...`` (five hex digits or more) and the bare hexadecimal handle
  after ``context``/``handle``/``pointer``/``address`` (Numba's "non-primary CUDA context 349c6ed0") read
  ``0x…``; a null handle (``0x0``) and small ids stay, they are decided;
- rates and timings (numbers with a decimal point) read ``#.#``, but never a version: a number of three parts
  (``14.2.0``) or one that follows a name a version follows (``CUDA 13.2``, ``driver 580.95``, ``CuPy 14.2``,
  ``version 2.1``) is the machine's, and a change of it is drift (``version_changes`` names it);
- the numbers of a silent wrong result: ``silent-wrong-result (got 184549376, expected 1073741824)`` reads
  ``silent-wrong-result`` (the class is compared, the wrong values are not), and the count after "wrong
  values (returned) without an error:" reads ``some`` unless it is 0 (wrong values appearing or vanishing is
  compared, how many of them is not);
- distributions over repeats (``claim.spread``: "A in 2 of 3, B in 1 of 3"): items that became the same
  class are merged and the items sorted (equal counts print in the order first seen, which races decide);
  where a distribution holds silent wrong results, how the repeats split between the classes reads ``#``
  and a correct read beside them is dropped ("silent-wrong-result in # of 2", as "silent-wrong-result (all
  2)" reads too): in undefined-behaviour territory such as an unordered hand-over the split, and whether
  the race was won once, are the race's, not the code's (two H200 runs of the same code read both forms).
  The race vanishing (every read correct), an error appearing and the count of repeats are compared; a
  distribution of one other class reads as ``spread`` prints one: ``CUDA_ERROR_X (all 2)``.

An exception recorded with its origin (``ctxlab.cuda.origin``: ``Type (not a CUDA error): message``) reads as
files before the origin was recorded wrote it (``Type: message``): the two compare equal, and still apart from a
CUDA error (``Type (STATUS): message``), whatever the words.
"""

from __future__ import annotations

import builtins
import re

from ctxlab.records.schema import A_CUDA_ERROR, NOT_A_CUDA_ERROR, SILENT_WRONG

_VOLATILE = [
    (re.compile(r"0[xX][0-9a-fA-F]{5,}"), "0x…"),  # handles and addresses change every run
    # A handle printed without 0x where a handle is named (Numba: "non-primary CUDA context 349c6ed0").
    (re.compile(r"\b(context|handle|pointer|address)( +)[0-9a-fA-F]{5,}\b", re.IGNORECASE), r"\1\g<2>0x…"),
    (re.compile(re.escape(SILENT_WRONG) + r" \(got [^()]*\)"), SILENT_WRONG),  # the wrong values read
    (re.compile(r"(wrong values? (?:returned )?without an error: )[1-9]\d*"), r"\g<1>some"),
]

# A number with a decimal point: a rate or a timing (blanked) unless it is a version (kept).
_DECIMAL = re.compile(r"\b\d+\.\d+(?:\.\d+)*\b")
# The names a version follows, with what may stand between ("CUDA 13.2", "driver: 580.95", "CuPy v14.2").
_NAMED = (r"(?:\b(?:CUDA|CuPy|cupy|driver|runtime|Python|python|NumPy|numpy|PyTorch|torch|JAX|jax|jaxlib|Numba|"
          r"numba|numba-cuda|cuda-bindings|cuda_bindings|cuda-python|cuda\.core|cuda-core|NCCL|cuDNN|CUPTI|cupti|"
          r"nvcc|version|ctxlab)[ :=]{0,3}v?|\bv)")
_VERSION_OF = re.compile(_NAMED + "$")
VERSION = re.compile(_NAMED + r"\d+(?:\.\d+)+\b|\b\d+\.\d+\.\d+\b")


def _decimal(match: re.Match) -> str:
    text = match.group(0)
    if text.count(".") >= 2 or _VERSION_OF.search(match.string[max(0, match.start() - 16):match.start()]):
        return text  # a version: the machine's, compared
    return "#.#"


def version_changes(was: str, now: str) -> list[tuple[str, str]]:
    """The versions named in two evidences that differ, in order ((before, after) each); [] where the same."""
    before, after = VERSION.findall(was), VERSION.findall(now)
    return [(b, a) for b, a in zip(before, after, strict=False) if b != a]


# One item of a distribution ("CUDA_ERROR_X in 2 of 3"), and a run of them separated by ", ". An item's text
# reaches back to the previous , ; or : (re finds the leftmost start).
_ITEM = r"[^,;:]+? in \d+ of \d+"
_SPREAD = re.compile(rf"{_ITEM}(?:, {_ITEM})*")
_COUNT = re.compile(r" in \d+ of \d+")  # no such count: no distribution (most evidence), nothing to scan
_STOPS = re.compile(r"[,;:]")
_PARTS = re.compile(r"^(?P<what>.+?) in (?P<n>\d+) of (?P<of>\d+)$", re.DOTALL)


def _spread(match: re.Match) -> str:
    text = match.group(0)
    items = [_PARTS.match(item.strip()) for item in text.split(", ")]
    parts = [(m["what"], int(m["n"]), m["of"]) for m in items if m]
    if len(parts) < 2 or len(parts) != len(items) or len({of for _, _, of in parts}) != 1:
        return text  # one item, or not one distribution: as written
    lead, total = text[:len(text) - len(text.lstrip())], parts[0][2]
    counts: dict[str, int] = {}
    for what, n, _ in parts:
        counts[what] = counts.get(what, 0) + n
    if len(counts) == 1 and sum(counts.values()) == int(total):
        return f"{lead}{next(iter(counts))} (all {total})"
    racy = SILENT_WRONG in counts
    if racy:  # beside silent wrong results, a correct read is the race's timing too (as the split is)
        counts.pop("correct", None)
    return lead + ", ".join(f"{what} in {'#' if racy else n} of {total}" for what, n in sorted(counts.items()))


def _spreads(text: str) -> str:
    """``_SPREAD.sub(_spread, text)`` in linear time. re.sub tries _SPREAD at every position, and each try
    scans on to the next , ; or : (quadratic in a long stretch without one: 100 µs an evidence, most of a
    fleet merge). A match can only start where the text starts, after , ; or : or where the last match
    ended: from any other position the stretch holds no count that the try at its start did not find. So
    only those positions are tried, each with the same pattern: the same matches, the same result."""
    if _COUNT.search(text) is None:
        return text
    out, done, at, end = [], 0, 0, len(text)
    while at < end:
        found = _SPREAD.match(text, at)
        if found is not None:
            out += [text[done:at], _spread(found)]
            done = at = found.end()
            continue
        stop = _STOPS.search(text, at)
        if stop is None:
            break
        at = stop.end()
    return "".join(out) + text[done:] if out else text


# A race whose every read was wrong, as claim.spread prints it: read as the racy distributions above read.
_ALL_WRONG = re.compile(re.escape(SILENT_WRONG) + r" \(all (\d+)\)")


# An exception's origin as ctxlab.cuda.origin records it, after its type: a CUDA status, a CUDA error whose
# library does not say which, or not a CUDA error.
_ORIGIN = rf"(?:{re.escape(NOT_A_CUDA_ERROR)}|{re.escape(A_CUDA_ERROR)}|CUDA_ERROR_\w+|cudaError\w+|NVRTC_ERROR_\w+)"
_NOT_CUDA = re.compile(rf"\b([A-Za-z_]\w*) \({re.escape(NOT_A_CUDA_ERROR)}\): ")


def normalize(evidence: str) -> str:
    """Evidence as drift compares it: handles, addresses, timings and the values and splits of silent wrong
    results blanked, distributions in one order (the module docstring says what and why)."""
    if NOT_A_CUDA_ERROR in evidence:  # as files before the origin was recorded read it
        evidence = _NOT_CUDA.sub(r"\1: ", evidence)
    for pattern, replacement in _VOLATILE:
        evidence = pattern.sub(replacement, evidence)
    if "." in evidence:
        evidence = _DECIMAL.sub(_decimal, evidence)
    return _ALL_WRONG.sub(SILENT_WRONG + r" in # of \1", _spreads(evidence))


# In the reads after a teardown, an error as a read met it: an exception recorded with its origin (its type and
# origin), or one recorded before origins were (its type), and its message up to the item's count (" in 2 of 3",
# " (all 3)"), the nearest one, as a library's message may hold ";" and ":"; or a CUDA status by its name alone
# (CUDA_ERROR_X, cudaErrorX), the rest of the item kept.
_UNTIL_COUNT = r".*?(?= in \d+ of \d+| \(all \d+\)|\Z)"
_READ_ERROR = re.compile(rf"\b(?P<marked>[A-Za-z_]\w*) \((?P<origin>{_ORIGIN})\): {_UNTIL_COUNT}"
                         rf"|\b(?P<type>[A-Z]\w*(?:Error|Exception))\b(?P<message>{_UNTIL_COUNT})"
                         r"|\bCUDA_ERROR_\w+|\bcudaError\w+", re.DOTALL)
# A library's message that is about a CUDA error: it names a status, CUresult, "CUDA error", or the driver or
# runtime call that failed (JAX: "Failed to create tensormap with cuTensorMapEncodeTiled: an illegal memory
# access was encountered").
_ABOUT_CUDA = re.compile(r"CUDA_ERROR_|cudaError|\bCUresult\b|\bCUDA error\b|\bcu(?:da)?[A-Z]\w*")
_EXCEPTION_NAME = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Iteration)\b")
# The reads after a teardown: undefined behaviour, whose CUDA error varies between runs of the same code.
_READS = re.compile(r"((?:old|new) array -> )(.*?)(?=; a new array -> |; wrong values|$)", re.DOTALL)


def _pythons_own(name: str) -> bool:
    """An exception of Python's own (TypeError, KeyError...): raised by a lab's bug, never the driver's answer."""
    builtin = getattr(builtins, name, None)
    return isinstance(builtin, type) and issubclass(builtin, BaseException)


def names_pythons_own(text: str) -> bool:
    """Whether ``text`` names an exception of Python's own (a library's message carrying a lab's TypeError)."""
    return any(_pythons_own(name) for name in _EXCEPTION_NAME.findall(text))


def _error_kind(match: re.Match) -> str:
    """An error a read met, as drift compares it: a CUDA status as one, a library's CUDA error by its type;
    anything else exactly as written. Where the origin was recorded (``ctxlab.cuda.origin``) it decides, whatever
    the message says; in files from before, the words do: a library's exception is a CUDA error where its message
    is about one and names no exception of Python's own (an exception of Python's own, and a library's exception
    about something other than CUDA, are kept: a lab's bug may raise either)."""
    if match["marked"] is not None:
        if match["origin"] == NOT_A_CUDA_ERROR:
            return match.group(0)  # a lab's bug or a library's own refusal: compared exactly, whatever it says
        return f"{match['marked']} ({A_CUDA_ERROR})"
    kind = match["type"]
    if kind is None:
        return A_CUDA_ERROR
    message = match["message"]
    if _pythons_own(kind) or names_pythons_own(message):
        return match.group(0)
    if _ABOUT_CUDA.search(message) is None:
        return match.group(0)
    return f"{kind} ({A_CUDA_ERROR})"  # no colon: it stays one item of a spread


def _reads(match: re.Match) -> str:
    """The reads of one array after a teardown, each error by its kind, items of one kind merged."""
    text = _READ_ERROR.sub(_error_kind, match.group(2))
    items = [_PARTS.match(item.strip()) for item in text.split(", ")]
    if len(items) > 1 and all(items) and len({m["of"] for m in items if m}) == 1:
        counts: dict[str, int] = {}
        for m in items:
            assert m is not None
            counts[m["what"]] = counts.get(m["what"], 0) + int(m["n"])
        total = int(items[0]["of"]) if items[0] else 0
        if len(counts) == 1 and sum(counts.values()) == total:
            text = f"{next(iter(counts))} (all {total})"
        else:
            text = ", ".join(f"{what} in {n} of {total}" for what, n in counts.items())
    return match.group(1) + text


def normalize_undefined(evidence: str) -> str:
    """Evidence of a claim whose undefined behaviour meets an error that varies between runs
    (``Claim.error_varies``: use after a teardown) as drift compares it: ``normalize``, and then, in the reads
    after the teardown only ("old array -> ...", "new array -> ..."), which CUDA error each repeat met reads
    "a CUDA error": a CUDA status by its name, a library's CUDA error by its type (recorded so by its origin,
    ``ctxlab.cuda.origin``; in files from before, where its message names the status or the call that failed):
    the H200 gave CUDA_ERROR_ILLEGAL_ADDRESS in one run of the same code and CUDA_ERROR_INVALID_VALUE in the
    next, labs/results/matrix/. Whether a read met an error, a silent wrong result, a correct value or a crash is
    compared; so are, exactly, the documented status of the call under test (outside the reads), any exception
    recorded as not a CUDA error whatever its message says, any exception of Python's own and any message naming
    one (a lab's bug), a library's exception about anything but CUDA, and what an item says beside a CUDA
    status."""
    return normalize(_READS.sub(_reads, evidence))  # then errors that became one kind merge in their spread
