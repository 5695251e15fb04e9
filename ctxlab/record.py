"""The result records under their first import path: the model is ``ctxlab.records.model``, the schema's
names ``ctxlab.records.schema``, reading files ``ctxlab.records.files``; this module forwards to them (and to
``ctxlab.output``, the one writer) so that code written against ``ctxlab.record`` keeps working.
Deprecated: importing it warns; import from those.

A file holds one run (``{"schema": "ctxlab/1", "lab": ...}``) or several
(``{"schema": "ctxlab/1", "runs": [...]}``); both load with ``load_runs``.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from ctxlab.records.model import ClaimResult, LabResult, Observation, ResultFileError, dumps
from ctxlab.records.schema import FAILING, KINDS, SCHEMA, SILENT_WRONG, VERDICTS

__all__ = ["FAILING", "KINDS", "SCHEMA", "SILENT_WRONG", "VERDICTS", "ClaimResult", "LabResult", "Observation",
           "ResultFileError", "atomic_write", "check_writable", "dumps", "load_runs", "parse_runs"]


def parse_runs(data: Any, origin: str = "<data>") -> list[LabResult]:
    """Records from a decoded ctxlab/1 document, its shape checked first (``ctxlab.records.shapes``)."""
    from ctxlab.records.shapes import runs_from_document

    return runs_from_document(data, origin)


def load_runs(path: str | os.PathLike) -> list[LabResult]:
    """The runs in a result file, read within the default size limit (``ctxlab.records.files``)."""
    from ctxlab.records.files import load_runs as load

    return load(path)


def atomic_write(path: str | os.PathLike, text: str) -> None:
    """Write a report through the one output writer (``ctxlab.output``): never half a file."""
    from ctxlab.output import write_output

    write_output(os.fspath(path), text)


def check_writable(path: str | os.PathLike) -> None:
    """Fail before a long run, not after it, when an output path cannot be written."""
    from ctxlab.output import check_writable as check

    check(os.fspath(path))


warnings.warn("ctxlab.record is deprecated: import ctxlab.records.model (the records), ctxlab.records.schema (its "
              "names), ctxlab.records.files (load_runs), ctxlab.records.shapes (runs_from_document) or ctxlab.output "
              "(write_output)", DeprecationWarning, stacklevel=2)
