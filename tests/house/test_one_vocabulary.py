"""The audit and the tracer say each thing once: no module-level constant name is defined in two of their modules
(``LAUNCHES`` once meant three different sets of calls in three modules, ``STREAM_SYNCS`` three, two of them with
the stream queries and one without). A family of calls has one name, in ``ctxlab/audit/events.py`` (or, below the
audit, ``ctxlab/tracing/names.py``)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ctxlab/audit", "ctxlab/tracing")


def constants(path: Path) -> set[str]:
    """The public upper-case names a module assigns at its top level (a private one is the module's own)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and name.id.isupper() and len(name.id) > 1 and name.id[0] != "_":
                    names.add(name.id)
    return names


def defined_twice(paths: list[Path], root: Path = ROOT) -> dict[str, list[str]]:
    """Each public constant name assigned in more than one of the modules, with where."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for name in constants(path):
            where[name].append(str(path.relative_to(root)))
    return {name: places for name, places in where.items() if len(places) > 1}


def test_no_constant_name_is_defined_in_two_modules_of_the_audit_or_the_tracer():
    paths = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
    assert len(paths) > 30
    assert defined_twice(paths) == {}


def test_the_check_sees_a_second_definition(tmp_path):
    (tmp_path / "a.py").write_text('LAUNCHES = ("cuLaunchKernel",)\nx = 1\n')
    (tmp_path / "b.py").write_text('from a import x\nLAUNCHES: tuple = ("cuLaunchKernel", "cuGraphLaunch")\n')
    (tmp_path / "c.py").write_text('_PRIVATE = 1\nALONE = 2\n')
    (tmp_path / "d.py").write_text('_PRIVATE = 3\n')  # a private name is the module's own
    found = defined_twice([tmp_path / n for n in ("a.py", "b.py", "c.py", "d.py")], tmp_path)
    assert found == {"LAUNCHES": ["a.py", "b.py"]}
