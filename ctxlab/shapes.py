"""The shape of a ctxlab/1 document: moved to ``ctxlab.records.shapes``; this import path forwards to it.
Deprecated: importing it warns."""

from __future__ import annotations

import warnings

from ctxlab.records.shapes import (
    MAX_DEPTH,
    check_document,
    inert,
    runs_from_document,
    schema_errors,
    type_name,
    valid_fast,
)

__all__ = ["MAX_DEPTH", "check_document", "inert", "runs_from_document", "schema_errors", "type_name", "valid_fast"]

warnings.warn('ctxlab.shapes is deprecated: import ctxlab.records.shapes', DeprecationWarning, stacklevel=2)
