"""The JSON Schema (draft 2020-12) of result files, schema ``ctxlab/1``, as described in docs/schema.md."""

from __future__ import annotations

import json
from importlib import resources

FILE = "ctxlab-1.schema.json"


def schema() -> dict:
    """The ``ctxlab/1`` JSON Schema, loaded from the package data (a fresh dict on every call)."""
    return json.loads(resources.files(__name__).joinpath(FILE).read_text(encoding="utf-8"))
