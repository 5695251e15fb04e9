"""Reading result files safely: moved to ``ctxlab.records.files``; this import path forwards to it."""

from __future__ import annotations

from ctxlab.records.files import (
    LIMIT_HINT,
    MAX_DIGITS,
    check_limit,
    decode_json,
    load_runs,
    nesting_depth,
    read_bounded,
    size_text,
)

__all__ = ["LIMIT_HINT", "MAX_DIGITS", "check_limit", "decode_json", "load_runs", "nesting_depth", "read_bounded",
           "size_text"]
