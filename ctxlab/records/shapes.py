"""The shape of a ctxlab/1 document, checked before records are built from it.

A file from another machine may hold anything; the reporters may then rely on
every field having its documented type. Each error names where it is, as a path
from the document's root (``runs[2].claims[0].verdict``), and quotes file
content only through ``inert`` so that the message stays one harmless line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from ctxlab.records import schema as names
from ctxlab.records.model import LabResult, ResultFileError

# Records nest 5 levels (runs, run, observations, observation, value); a value may nest
# further, but nothing a lab records comes near this.
MAX_DEPTH = 64

_TYPE_NAMES = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string",
               list: "a list", dict: "a JSON object"}


def type_name(value: Any) -> str:
    """What a JSON value is, in JSON's words (null, a string, a list...)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def inert(value: Any, limit: int = 60) -> str:
    """File content quoted for a one-line message: JSON with every control character escaped, cut short."""
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Shape:
    """Checks one document, collecting the path to where it is."""

    def __init__(self, origin: str):
        self.origin = origin

    def fail(self, where: str, problem: str):
        raise ResultFileError(f"{self.origin}: {where}: {problem}" if where else f"{self.origin}: {problem}")

    def obj(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"expected a JSON object, found {type_name(value)}")
        return value

    def array(self, value: Any, where: str) -> list:
        if not isinstance(value, list):
            self.fail(where, f"expected a list, found {type_name(value)}")
        return value

    def field(self, data: dict, key: str, where: str, kind: str, required: bool = True,
              nullable: bool = False) -> None:
        """``data[key]`` is of ``kind`` (str, int, number, object, list); may be absent unless required."""
        at = f"{where}.{key}" if where else key
        if key not in data:
            if required:
                self.fail(where, f"no {json.dumps(key)} field")
            return
        value = data[key]
        if value is None and nullable:
            return
        ok = {"str": isinstance(value, str),
              "int": isinstance(value, int) and not isinstance(value, bool),
              "number": isinstance(value, (int, float)) and not isinstance(value, bool),
              "object": isinstance(value, dict),
              "list": isinstance(value, list)}[kind]
        if not ok:
            wanted = {"str": "a string", "int": "an integer", "number": "a number", "object": "a JSON object",
                      "list": "a list"}[kind]
            self.fail(at, f"expected {wanted}{' or null' if nullable else ''}, found {type_name(value)}")

    def run(self, data: Any, where: str) -> None:
        data = self.obj(data, where)
        prefix = f"{where}." if where else ""
        for key in ("lab", "started"):
            self.field(data, key, where, "str")
        self.field(data, "seconds", where, "number")
        self.field(data, "environment", where, "object")
        self.field(data, "options", where, "object", required=False)
        self.field(data, "metrics", where, "object", required=False)
        self.field(data, "timings", where, "object", required=False)
        self.field(data, "trace", where, "list", required=False)
        self.field(data, "views", where, "object", required=False)
        for kind, fields in data.get("views", {}).items():
            for index, name in enumerate(self.array(fields, f"{prefix}views.{kind}")):
                if not isinstance(name, str):
                    self.fail(f"{prefix}views.{kind}[{index}]", f"expected a string, found {type_name(name)}")
        for index, flag in enumerate(self.array(data.get("flags", []), f"{prefix}flags")):
            self.field(self.obj(flag, f"{prefix}flags[{index}]"), "flag", f"{prefix}flags[{index}]", "str")
        if "environment_error" in data:  # a node that could not run (ctxlab.records.environment_error)
            unable = self.obj(data["environment_error"], f"{prefix}environment_error")
            for key in ("reason", "message"):
                self.field(unable, key, f"{prefix}environment_error", "str")
        for index, obs in enumerate(self.array(data.get("observations"), f"{prefix}observations")):
            if not _plain_observation(obs):  # the rules below say which, and where
                self.observation(obs, f"{prefix}observations[{index}]")
        for index, claim in enumerate(self.array(data.get("claims"), f"{prefix}claims")):
            if not _plain_claim(claim):
                self.claim(claim, f"{prefix}claims[{index}]")
        for index, error in enumerate(self.array(data.get("errors", []), f"{prefix}errors")):
            error = self.obj(error, f"{prefix}errors[{index}]")
            for key in ("scenario", "kind", "message", "output_tail"):
                self.field(error, key, f"{prefix}errors[{index}]", "str", required=False, nullable=True)

    def observation(self, data: Any, where: str) -> None:
        data = self.obj(data, where)
        for key in ("step", "thread", "what"):
            self.field(data, key, where, "str")
        for key in ("context_id", "context", "round", "repeat"):
            self.field(data, key, where, "int", required=False, nullable=True)
        self.field(data, "scenario", where, "str", required=False, nullable=True)
        self.field(data, "events", where, "list", required=False)

    def claim(self, data: Any, where: str) -> None:
        data = self.obj(data, where)
        for key in ("id", "statement", "source", "verdict", "evidence"):
            self.field(data, key, where, "str")
        if data["verdict"] not in names.VERDICTS:  # read now: the list of verdicts grows
            self.fail(f"{where}.verdict", f"{inert(data['verdict'])} is not one of {', '.join(names.VERDICTS)}")
        if data.get("kind", "observation") not in names.KINDS:
            self.fail(f"{where}.kind", f"{inert(data['kind'])} is not one of {', '.join(names.KINDS)}")
        self.field(data, "skip", where, "object", required=False, nullable=True)
        if isinstance(data.get("skip"), dict):  # a structured reason (ctxlab.records.skips): its kind, named
            self.field(data["skip"], "kind", f"{where}.skip", "str")


_INT_OR_NULL = (int, type(None))  # exact types: a bool, or a subclass, takes the rules above
_STR_OR_NULL = (str, type(None))
_NO_LIST = object()


def _plain_observation(data: Any) -> bool:
    """True when ``data`` passes ``_Shape.observation`` by its exact JSON types (every decoded observation
    that fits does); False leaves it to the rules, which say what is wrong, or pass a value of a subclass.
    One look per field: a file holds hundreds of observations per run."""
    if type(data) is not dict:
        return False
    get = data.get
    return (type(get("step")) is str and type(get("thread")) is str and type(get("what")) is str
            and type(get("context_id")) in _INT_OR_NULL and type(get("context")) in _INT_OR_NULL
            and type(get("round")) in _INT_OR_NULL and type(get("repeat")) in _INT_OR_NULL
            and type(get("scenario")) in _STR_OR_NULL
            and ((events := get("events", _NO_LIST)) is _NO_LIST or type(events) is list))


def _plain_claim(data: Any) -> bool:
    """True when ``data`` passes ``_Shape.claim`` by exact types and known names; False leaves it to the rules."""
    if type(data) is not dict:
        return False
    get = data.get
    return (type(get("id")) is str and type(get("statement")) is str and type(get("source")) is str
            and type(get("evidence")) is str and type(get("verdict")) is str and get("verdict") in names.VERDICTS
            and type(get("kind", "observation")) is str and get("kind", "observation") in names.KINDS
            and ((skip := get("skip")) is None or (type(skip) is dict and type(skip.get("kind")) is str)))


def check_document(data: Any, origin: str) -> list[dict]:
    """The run objects of a ctxlab/1 document, each checked; ResultFileError naming where one is wrong."""
    shape = _Shape(origin)
    shape.obj(data, "")
    if "schema" not in data:
        shape.fail("", f"no \"schema\" field: not a ctxlab result file (this ctxlab reads {names.SCHEMA})")
    if data["schema"] != names.SCHEMA:
        shape.fail("", f"schema {inert(data['schema'])} is not {json.dumps(names.SCHEMA)}; "
                       f"this ctxlab reads {names.SCHEMA} only")
    if "runs" not in data:
        shape.run(data, "")
        return [data]
    runs = shape.array(data["runs"], "runs")
    for index, item in enumerate(runs):
        shape.run(item, f"runs[{index}]")
    return runs


def schema_errors(data: Any) -> Iterator[tuple[str, str]]:
    """(path, problem) for every way ``data`` breaks the ``ctxlab/1`` JSON Schema (docs/schema.md)."""
    from jsonschema import Draft202012Validator

    from ctxlab.schema import schema

    global _validator
    if _validator is None:
        _validator = Draft202012Validator(schema())
    try:
        errors = sorted(_validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    except (OverflowError, ValueError) as exc:  # a number too large to compare (decoded files never hold one)
        yield "", f"a number too large to check ({type(exc).__name__})"
        return
    for error in errors:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        yield path, error.message


_validator: Any = None
_compiled: Any = None


def valid_fast(data: Any) -> bool:
    """True when ``data`` fits the schema by its compiled check (``ctxlab.schema.compiled``); False when it
    does not, or the check cannot say (then ``schema_errors`` decides, and names the problem)."""
    global _compiled
    if _compiled is None:
        from ctxlab.schema import schema
        from ctxlab.schema.compiled import Unsupported, compile_schema

        try:
            _compiled = compile_schema(schema())
        except Unsupported:
            _compiled = False
    if _compiled is False:
        return False
    try:
        return bool(_compiled(data))
    except Exception:  # anything unexpected: jsonschema decides
        return False


def runs_from_document(data: Any, origin: str = "<data>",
                       build: Callable[[dict], LabResult] = LabResult.from_dict) -> list[LabResult]:
    """Records from a decoded document, after its shape is checked: first by the rules above (which name
    the problem plainly), then by the JSON Schema, so the loader accepts nothing the schema does not.
    ``build`` makes each run's record from its checked object (``report merge`` passes one that keeps only
    what a merge shows); what it raises as ``LabResult.from_dict`` would names the run as malformed."""
    runs_data = check_document(data, origin)
    for where, problem in () if valid_fast(data) else schema_errors(data):
        raise ResultFileError(f"{origin}: {where or 'the document'}: {inert(problem, 120)} "
                              "(against the ctxlab/1 schema)")
    runs = []
    for index, item in enumerate(runs_data):
        try:
            runs.append(build(item))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:  # a rule the records add that shapes lack
            where = f"runs[{index}]" if "runs" in data else "run"
            raise ResultFileError(f"{origin}: {where} is malformed: {inert(str(exc), 120)}") from None
    return runs
