"""The environment-error record under its first import path: reading it is
``ctxlab.records.environment_error``, making it ``ctxlab.cuda.environment_error``. Deprecated: import from
those; this path forwards with a warning."""

from __future__ import annotations

import warnings

from ctxlab.cuda.environment_error import environment_error_run, reason_of
from ctxlab.records.environment_error import (
    ERROR_KIND,
    LAB,
    REASON_TEXT,
    REASONS,
    describe,
    is_environment_error,
)

__all__ = ["ERROR_KIND", "LAB", "REASONS", "REASON_TEXT", "describe", "environment_error_run",
           "is_environment_error", "reason_of"]

warnings.warn("ctxlab.envrecord is deprecated: import ctxlab.records.environment_error (reading the record) or "
              "ctxlab.cuda.environment_error (making it)", DeprecationWarning, stacklevel=2)
