"""Reading result files safely: moved to ``ctxlab.records.files``; this import path forwards to it.
Deprecated: importing it warns."""

from __future__ import annotations

import warnings

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

warnings.warn('ctxlab.loading is deprecated: import ctxlab.records.files', DeprecationWarning, stacklevel=2)
