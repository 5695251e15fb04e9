"""The ``ctxlab/1`` JSON Schema compiled to plain Python checks: a yes or no, many times faster than
``jsonschema`` on a result file (``report merge`` of a fleet reads a thousand of them).

It knows only the keywords the schema uses, with draft 2020-12's meaning: ``type``, ``const``, ``enum``,
``required``, ``properties``, ``additionalProperties``, ``items``, ``minimum``, ``minLength``, ``pattern``,
``dependentRequired``, ``if``/``then``/``else`` and local ``$ref``; ``format`` and the annotations
(``description``, ``title``, ``default``) assert nothing, as in ``jsonschema`` without a format checker.
A schema with any other keyword does not compile (``Unsupported``): the caller then uses ``jsonschema``
alone. The compiled check only answers; where it says no, ``jsonschema`` explains (``shapes.schema_errors``).
tests/test_schema_compiled.py holds it to ``jsonschema``'s answers on recorded and mutated files.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

ANNOTATIONS = frozenset({"description", "title", "default", "format", "$schema", "$id", "$comment", "examples"})


class Unsupported(ValueError):
    """The schema uses a keyword this compiler does not know."""


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_TYPES: dict[str, Check] = {
    "null": lambda x: x is None,
    "boolean": lambda x: isinstance(x, bool),
    "string": lambda x: isinstance(x, str),
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "number": _is_number,
    # jsonschema counts a float with no fraction (1.0) as an integer
    "integer": lambda x: (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, float) and x.is_integer()),
}


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


def _properties(x: dict, props: tuple[tuple[str, Check], ...]) -> bool:
    for key, check in props:
        if key in x and not check(x[key]):
            return False
    return True


class _Compiler:
    def __init__(self, root: dict):
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, pointer: str) -> Check:
        if not pointer.startswith("#/"):
            raise Unsupported(f"$ref {pointer!r} is not local")
        if pointer not in self.refs:
            target: Any = self.root
            for part in pointer[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            slot: list[Check] = []
            self.refs[pointer] = lambda x: slot[0](x)  # recursion-safe: filled in below
            slot.append(self.compile(target))
        return self.refs[pointer]

    def compile(self, node: Any) -> Check:  # noqa: C901 - one branch per keyword
        if node is True:
            return lambda x: True
        if node is False:
            return lambda x: False
        if not isinstance(node, dict):
            raise Unsupported(f"a schema must be an object or a boolean, not {type(node).__name__}")
        checks: list[Any] = []  # Checks (lambdas with bound defaults, which mypy cannot type as Check)
        for key, value in node.items():
            if key in ANNOTATIONS or key == "$defs":
                continue
            if key == "type":
                names = [value] if isinstance(value, str) else list(value)
                tests = [_TYPES[n] for n in names]
                if len(tests) == 1:
                    checks.append(tests[0])
                elif len(tests) == 2:
                    checks.append(lambda x, a=tests[0], b=tests[1]: a(x) or b(x))
                else:
                    checks.append(lambda x, t=tests: any(f(x) for f in t))
            elif key == "const":
                checks.append(lambda x, c=value: _equal(x, c))
            elif key == "enum":
                checks.append(lambda x, e=list(value): any(_equal(x, c) for c in e))
            elif key == "required":
                checks.append(lambda x, r=list(value): not isinstance(x, dict) or all(k in x for k in r))
            elif key == "properties":
                props = {k: self.compile(v) for k, v in value.items()}
                checks.append(lambda x, p=tuple(props.items()): not isinstance(x, dict) or _properties(x, p))
            elif key == "additionalProperties":
                extra = self.compile(value)
                known = frozenset(node.get("properties", {}))
                checks.append(lambda x, f=extra, k=known: not isinstance(x, dict)
                              or all(f(v) for n, v in x.items() if n not in k))
            elif key == "items":
                each = self.compile(value)
                checks.append(lambda x, f=each: not isinstance(x, list) or all(f(v) for v in x))
            elif key == "minimum":
                checks.append(lambda x, m=value: not _is_number(x) or x >= m)
            elif key == "minLength":
                checks.append(lambda x, m=value: not isinstance(x, str) or len(x) >= m)
            elif key == "pattern":
                checks.append(lambda x, p=re.compile(value): not isinstance(x, str) or p.search(x) is not None)
            elif key == "dependentRequired":
                deps = {k: list(v) for k, v in value.items()}
                checks.append(lambda x, d=deps: not isinstance(x, dict)
                              or all(r in x for k, rs in d.items() if k in x for r in rs))
            elif key == "if":
                cond = self.compile(value)
                then = self.compile(node.get("then", True))
                other = self.compile(node.get("else", True))
                checks.append(lambda x, c=cond, t=then, o=other: t(x) if c(x) else o(x))
            elif key in ("then", "else"):
                continue  # compiled with "if"
            elif key == "$ref":
                checks.append(self.ref(value))
            else:
                raise Unsupported(f"keyword {key!r}")
        if len(checks) == 1:
            return checks[0]
        every: tuple[Check, ...] = tuple(checks)
        return lambda x: all(f(x) for f in every)


def compile_schema(schema: dict) -> Check:
    """A function telling whether a decoded JSON document is valid against ``schema``; Unsupported when the
    schema uses a keyword this module does not know."""
    return _Compiler(schema).compile(schema)
