"""Shared wording for the reporters: how a value, a figure, a context and an environment read."""

from __future__ import annotations

import json
import re

from ctxlab.records.model import LabResult, Observation
from ctxlab.report.escape import markdown, terminal

# Values recorded under these names are handles and addresses: always shown in hex.
_HANDLE_KEY = re.compile(r"context|current|primary|pointer|handle|address|stream|kernel|function|global|module|"
                         r"library|ctx|attached|bound|created", re.I)
_NOT_HANDLE_KEY = re.compile(r"sum|count|bytes|size|value|expected|retain|flags|version|(^|_)id$", re.I)


def is_handle_key(key: object) -> bool:
    """True when a value's name says it is a handle or an address."""
    return isinstance(key, str) and bool(_HANDLE_KEY.search(key)) and not _NOT_HANDLE_KEY.search(key)


def hexify(value, key: object = None):
    """``value`` with every integer recorded under a handle's name written in hex."""
    if isinstance(value, dict):
        return {k: hexify(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [hexify(v, key) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and value > 0 and is_handle_key(key):
        return f"{value:#x}"
    return value


def short(value, limit: int = 90) -> str:
    """A value on one line, cut at ``limit`` characters; handles in hex."""
    text = value if isinstance(value, str) else json.dumps(hexify(value), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


FULL_OR_JSON = "--full or --format json"  # where a text the screen cuts is whole
JSON_ONLY = "--format json"  # where a name or a Markdown cell cut is whole


def capped(value: object, limit: int, where: str = JSON_ONLY) -> str:
    """``value`` as text, cut after ``limit`` characters with a note saying how many more there are and
    ``where`` they are whole: a result file from another runner may hold a string of any size, and no
    report needs it all on a screen or in a table cell."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters: {where})"


TEXT_CHARS = 4000  # a sentence on screen unless full: 50 lines at 80 columns (the longest recorded: 1,244)
NAME_CHARS = 200  # a name on screen (the longest recorded claim id: 46)


def shown_as_is(value: object) -> str:
    """``escape.terminal(value)``, at once where there is nothing to escape: printable ASCII holds no escape
    sequence, control character or surrogate (64 MiB of it took the escaper 2 s)."""
    text = value if isinstance(value, str) else str(value)
    return text if text.isascii() and text.isprintable() else terminal(text)


def sentence(value: object, full: bool) -> str:
    """A statement, evidence or message for the screen: escaped, cut after TEXT_CHARS unless ``full``."""
    return shown_as_is(value if full else capped(value, TEXT_CHARS, FULL_OR_JSON))


def name(value: object) -> str:
    """A lab, claim, scenario or figure name for the screen: escaped, cut after NAME_CHARS."""
    return shown_as_is(capped(value, NAME_CHARS, JSON_ONLY))


def tail(value: object) -> str:
    """A program's output for the screen: escaped, its last TEXT_CHARS characters."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > TEXT_CHARS:
        text = f"… ({len(text) - TEXT_CHARS:,} characters before: {JSON_ONLY}) {text[-TEXT_CHARS:]}"
    return shown_as_is(text)


def figure(value) -> str:
    """A measured figure: rates and times to a sensible precision, not 13 decimals."""
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.1f}"
        return f"{value:.3g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return short(value)


def context_label(obs: Observation) -> str:
    """The context an observation saw: its id and handle, ? for an unknown id, - when there was none."""
    if obs.context_id is None and not obs.context:
        return "-"
    ident = "?" if obs.context_id is None else str(obs.context_id)
    return f"{ident} ({obs.context:#x})" if obs.context else ident


def environment_line(run: LabResult) -> str:
    """The GPU, compute capability, driver, runtime and library versions a run recorded, and the driver
    variables it ran under, on one line."""
    env = run.environment
    variables = env.get("driver_variables")
    parts = [env.get("gpu"), f"cc {env['compute_capability']}" if env.get("compute_capability") else None,
             f"driver {env['driver_version']}" if env.get("driver_version") else None,
             f"runtime {env['runtime_version']}" if env.get("runtime_version") else None,
             f"cupy {env['cupy']}" if env.get("cupy") else None,
             f"cuda-bindings {env['cuda_bindings']}" if env.get("cuda_bindings") else None,
             " ".join(f"{k}={v}" for k, v in sorted(variables.items())) if isinstance(variables, dict) else None]
    return ", ".join(str(p) for p in parts if p)


def verdict_counts(run: LabResult) -> dict[str, int]:
    """How many claims of the run have each verdict, in the order first met."""
    counts: dict[str, int] = {}
    for claim in run.claims:
        counts[claim.verdict] = counts.get(claim.verdict, 0) + 1
    return counts


def lab_views(run: LabResult) -> dict[str, tuple[str, ...]]:
    """A run's step tables as its record carries them: observation kind -> the value fields shown as columns."""
    return {kind: tuple(fields) for kind, fields in run.views.items()}


def cell(value, key: object = None) -> str:
    """One value in a step table's column named ``key``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and value > 0 and is_handle_key(key):
        return f"{value:#x}"
    return short(value, 60)


MARKDOWN_CHARS = 10_000  # a Markdown cell: a CI step summary holds 1 MiB in all


def markdown_cell(value: object) -> str:
    """Text for a Markdown cell or line (``escape.markdown``), cut after MARKDOWN_CHARS characters."""
    return markdown(capped(value, MARKDOWN_CHARS))
