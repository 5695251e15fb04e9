"""The names a ctxlab/1 document is written in (documented in docs/schema.md; the JSON Schema itself is
``ctxlab.schema``): the schema's name, the verdicts, what a claim rests on, the outcome label of a silent
wrong result."""

from __future__ import annotations

SCHEMA = "ctxlab/1"
TRACE_SCHEMA = "ctxlab-trace/2"  # ctxlab trace --format json (/1: the events of the Python-callback tracer)
# ctxlab audit --format json; /2 adds ending, probes and threads (the program runs in a child since then)
AUDIT_SCHEMA = "ctxlab-audit/2"

# unjudged: the claim lies above the level the run was made at (check --level); counted apart from skipped
VERDICTS = ("holds", "fails", "changed", "observed", "skipped", "unjudged", "error")
FAILING = frozenset({"fails", "error"})  # verdicts that make a run fail (exit status 1)
NOT_JUDGED = frozenset({"skipped", "unjudged"})  # a check where every claim has one of these judged nothing
KINDS = ("promise", "old-text", "observation")  # what a claim rests on
SILENT_WRONG = "silent-wrong-result"  # an outcome label: a value returned without error, and wrong
# An exception as an outcome says where it came from (ctxlab.cuda.origin): "Type (STATUS): message" raised from a
# library's CUDA error path (STATUS its status name, or A_CUDA_ERROR where the library does not say which),
# "Type (not a CUDA error): message" any other but Python's own ("TypeError: message"). Files before issue 49
# wrote "Type: message" for all; drift reads those by their wording (ctxlab.records.evidence).
A_CUDA_ERROR = "a CUDA error"
NOT_A_CUDA_ERROR = "not a CUDA error"
