"""The ``ctxlab/1`` JSON Schema compiled to plain Python: a yes or no, many times faster than ``jsonschema`` on
a result file (``report merge`` of a fleet reads a thousand of them).

It knows only the keywords the schema uses, with draft 2020-12's meaning: ``type``, ``const``, ``enum``,
``required``, ``properties``, ``additionalProperties``, ``items``, ``minimum``, ``minLength``, ``pattern``,
``dependentRequired``, ``if``/``then``/``else`` and local ``$ref``; ``format`` and the annotations
(``description``, ``title``, ``default``) assert nothing, as in ``jsonschema`` without a format checker.
A schema with any other keyword does not compile (``Unsupported``): the caller then uses ``jsonschema``
alone. The compiled check only answers; where it says no, ``jsonschema`` explains (``shapes.schema_errors``).

The schema becomes the source of one Python function (``source``), each keyword a statement that returns
False, ``$ref`` inlined: a file's six hundred observations are checked by straight-line code, not by a
call per keyword (a third of the time closures took). The source is built from the schema alone, never
from a document, and every name or value in it is written with ``repr`` or passed as a constant.
tests/test_schema_compiled.py and tests/report/test_fleet_merge.py hold it to ``jsonschema``'s answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

ANNOTATIONS = frozenset({"description", "title", "default", "format", "$schema", "$id", "$comment", "examples"})
KEYWORDS = frozenset({"type", "const", "enum", "required", "properties", "additionalProperties", "items", "minimum",
                      "minLength", "pattern", "dependentRequired", "if", "then", "else", "$ref", "$defs"})
MAX_LOOPS = 8  # loops nested in one function (Python allows 20 blocks); deeper ones go in a function of their own


class Unsupported(ValueError):
    """The schema uses a keyword this compiler does not know."""


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema has it: booleans are not numbers, 1 equals 1.0, containers deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


# Each JSON type as an expression of {v}; jsonschema counts a float with no fraction (1.0) as an integer.
_TYPES = {
    "null": "{v} is None",
    "boolean": "isinstance({v}, bool)",
    "string": "isinstance({v}, str)",
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "integer": "((isinstance({v}, int) and not isinstance({v}, bool))"
               " or (isinstance({v}, float) and {v}.is_integer()))",
}
_NUMBER = _TYPES["number"]


class _Writer:
    """Writes the checks of a schema as Python statements, each returning False where the value breaks one."""

    def __init__(self, root: dict):
        self.root = root
        self.constants: dict[str, Any] = {"_equal": _equal, "_MISSING": object()}
        self.functions: list[list[str]] = []
        self.names = 0
        self.expanding: list[str] = []  # the $refs being inlined: a reference back to one becomes a call
        self.calls: dict[str, str] = {}  # $ref -> the name of its own function, where it needed one

    def fresh(self, stem: str) -> str:
        self.names += 1
        return f"{stem}{self.names}"

    def constant(self, value: Any) -> str:
        name = self.fresh("_c")
        self.constants[name] = value
        return name

    def function(self, node: Any, ref: str | None = None) -> str:
        """A function of its own for ``node``, returning True when the value fits."""
        name = self.fresh("_check")
        if ref is not None:
            self.calls[ref] = name
        lines = [f"def {name}(x):"]
        self.functions.append(lines)  # before the body: a reference back to it finds its name
        body: list[str] = []
        self.node(node, "x", body, 1, 0)
        lines += [*body, "    return True"]
        return name

    def resolve(self, pointer: str) -> Any:
        if not pointer.startswith("#/"):
            raise Unsupported(f"$ref {pointer!r} is not local")
        target: Any = self.root
        for part in pointer[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        return target

    def node(self, node: Any, v: str, out: list[str], depth: int, loops: int) -> None:  # noqa: C901
        pad = "    " * depth
        if node is True:
            return
        if node is False:
            out.append(f"{pad}return False")
            return
        if not isinstance(node, dict):
            raise Unsupported(f"a schema must be an object or a boolean, not {type(node).__name__}")
        for key in node:
            if key not in KEYWORDS and key not in ANNOTATIONS:
                raise Unsupported(f"keyword {key!r}")
        kind = None  # what the type check has already settled about v
        if "type" in node:
            names = [node["type"]] if isinstance(node["type"], str) else list(node["type"])
            tests = [_TYPES[n].format(v=v) for n in names]
            out.append(f"{pad}if not ({' or '.join(tests)}):\n{pad}    return False")
            kind = names[0] if len(names) == 1 else None
        is_dict = "" if kind == "object" else f"isinstance({v}, dict) and "
        if "const" in node:
            value = node["const"]
            test = (f"type({v}) is str and {v} == {value!r}" if isinstance(value, str)
                    else f"_equal({v}, {self.constant(value)})")
            out.append(f"{pad}if not ({test}):\n{pad}    return False")
        if "enum" in node:
            values = list(node["enum"])
            if values and all(isinstance(e, str) for e in values):
                test = f"type({v}) is str and {v} in {self.constant(frozenset(values))}"
            else:
                test = f"any(_equal({v}, e) for e in {self.constant(values)})"
            out.append(f"{pad}if not ({test}):\n{pad}    return False")
        if "required" in node and node["required"]:
            present = " and ".join(f"{k!r} in {v}" for k in node["required"])
            out.append(f"{pad}if {is_dict}not ({present}):\n{pad}    return False")
        if "dependentRequired" in node:
            for k, rs in node["dependentRequired"].items():
                needs = " and ".join(f"{r!r} in {v}" for r in rs) or "True"
                out.append(f"{pad}if {is_dict}{k!r} in {v} and not ({needs}):\n{pad}    return False")
        # Where the type check settled the type, the guards below are known to hold.
        is_number = "" if kind in ("number", "integer") else f"{_NUMBER.format(v=v)} and "
        is_str = "" if kind == "string" else f"isinstance({v}, str) and "
        if "minimum" in node:  # "not >=": NaN is below every minimum, as jsonschema has it
            out.append(f"{pad}if {is_number}not {v} >= {node['minimum']!r}:\n{pad}    return False")
        if "minLength" in node:
            out.append(f"{pad}if {is_str}len({v}) < {node['minLength']!r}:\n{pad}    return False")
        if "pattern" in node:
            pattern = self.constant(re.compile(node["pattern"]))
            out.append(f"{pad}if {is_str}{pattern}.search({v}) is None:\n{pad}    return False")
        if "properties" in node or "additionalProperties" in node:
            self.object(node, v, out, depth, loops, kind == "object")
        if "items" in node:
            self.each(node["items"], f"for {{w}} in {v}:", f"isinstance({v}, list)" if kind != "array" else None,
                      out, depth, loops)
        if "if" in node:
            cond = self.function(node["if"])
            then, other = self.function(node.get("then", True)), self.function(node.get("else", True))
            out.append(f"{pad}if not ({then}({v}) if {cond}({v}) else {other}({v})):\n{pad}    return False")
        if "$ref" in node:
            self.ref(node["$ref"], v, out, depth, loops)

    def object(self, node: dict, v: str, out: list[str], depth: int, loops: int, known: bool) -> None:
        pad = "    " * depth
        inner, body = depth, out
        if not known:
            out.append(f"{pad}if isinstance({v}, dict):")
            inner, body = depth + 1, []
        ipad = "    " * inner
        for key, sub in node.get("properties", {}).items():
            if sub is True or (isinstance(sub, dict) and not (set(sub) - ANNOTATIONS)):
                continue  # asserts nothing
            w = self.fresh("v")
            body.append(f"{ipad}{w} = {v}.get({key!r}, _MISSING)\n{ipad}if {w} is not _MISSING:")
            start = len(body)
            self.node(sub, w, body, inner + 1, loops)
            if len(body) == start:
                body.append(f"{ipad}    pass")
        if "additionalProperties" in node:
            extra = node["additionalProperties"]
            known_keys = list(node.get("properties", {}))
            head = (f"for {{k}}, {{w}} in {v}.items():\n{ipad}    if {{k}} in {self.constant(frozenset(known_keys))}:"
                    f"\n{ipad}        continue" if known_keys else f"for {{w}} in {v}.values():")
            self.each(extra, head, None, body, inner, loops)
        if not known:
            out += body or [f"{pad}    pass"]

    def each(self, sub: Any, head: str, guard: str | None, out: list[str], depth: int, loops: int) -> None:
        """A loop over the values ``head`` names, each checked against ``sub``."""
        if sub is True or (isinstance(sub, dict) and not (set(sub) - ANNOTATIONS)):
            return
        pad = "    " * depth
        if guard:
            out.append(f"{pad}if {guard}:")
            depth, pad = depth + 1, pad + "    "
        w, k = self.fresh("v"), self.fresh("k")
        out.append(pad + head.format(w=w, k=k))
        if loops + 1 >= MAX_LOOPS:
            out.append(f"{pad}    if not {self.function(sub)}({w}):\n{pad}        return False")
        else:
            self.node(sub, w, out, depth + 1, loops + 1)

    def ref(self, pointer: str, v: str, out: list[str], depth: int, loops: int) -> None:
        pad = "    " * depth
        if pointer in self.expanding:  # recursive: a function of its own, called
            name = self.calls.get(pointer) or self.function(self.resolve(pointer), pointer)
            out.append(f"{pad}if not {name}({v}):\n{pad}    return False")
            return
        self.expanding.append(pointer)
        try:
            self.node(self.resolve(pointer), v, out, depth, loops)
        finally:
            self.expanding.pop()


def source(schema: Any) -> tuple[str, dict[str, Any], str]:
    """(Python source, its constants, the name of the check) for ``schema``; Unsupported for a keyword this
    module does not know."""
    writer = _Writer(schema if isinstance(schema, dict) else {})
    name = writer.function(schema)
    return "\n".join("\n".join(lines) for lines in reversed(writer.functions)) + "\n", writer.constants, name


def compile_schema(schema: Any) -> Check:
    """A function telling whether a decoded JSON document is valid against ``schema``; Unsupported when the
    schema uses a keyword this module does not know."""
    text, constants, name = source(schema)
    namespace = dict(constants)
    exec(compile(text, "<ctxlab/1 schema>", "exec"), namespace)  # noqa: S102 - source written from the schema
    check: Check = namespace[name]
    return check
