"""The tree's shape (issue 24, "House 2.0"; issue 37, "House 3.0"): no import circle among ctxlab's modules,
every import an arrow the house's graph allows (ALLOWED: parts, and the parts each may import; siblings may
not import each other; a name taken from one's own package counts), and no module over 500 lines, except the
explicit lists below of what is still to be split or untangled.

Both lists may only shrink: a test fails when an entry no longer needs to be there, so that the fix is
recorded as the new rule. Never add to them; split the module or break the circle instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ctxlab"
MAX_LINES = 500

# Modules over MAX_LINES today. This list may only shrink: remove a module once it is split. (Empty since the
# labs became packages, issue 24.)
TOO_LONG: set[str] = set()

# Import circles still there today, each as the exact set of its modules. This list may only shrink. (Empty since
# the interop lab's helpers moved into ctxlab/labs/interop/libs.py, issue 24.)
KNOWN_CIRCLES: set[frozenset[str]] = set()


# The house as a graph: each part of ctxlab (a top-level module, or a package with everything under it) and the
# parts it may import. Parts not linked either way are siblings and may not import each other; the graph has no
# circle, so it still reads bottom to top (records and the leaves at the bottom, the CLI at the top).
LEAVES = ("ctxlab.version", "ctxlab.errors", "ctxlab.defaults", "ctxlab.levels", "ctxlab.interrupts",
          "ctxlab.schema", "ctxlab.tracing")
ALLOWED: dict[str, set[str]] = {
    **{leaf: set() for leaf in LEAVES},  # tracing: the C callback, tracer, flight recorder, the traced child
    "ctxlab.records": {"ctxlab.defaults", "ctxlab.errors", "ctxlab.schema"},
    "ctxlab.claim": {"ctxlab.levels", "ctxlab.records"},
    "ctxlab.cuda": {"ctxlab.records", "ctxlab.version"},
    "ctxlab.output": {"ctxlab.interrupts"},  # the one writer
    "ctxlab.trace": {"ctxlab.tracing"},  # the API's face of the events
    "ctxlab.report": {"ctxlab.defaults", "ctxlab.interrupts", "ctxlab.records", "ctxlab.tracing"},
    "ctxlab.audit": {"ctxlab.records", "ctxlab.report", "ctxlab.tracing", "ctxlab.version"},
    "ctxlab.lab": {"ctxlab.claim", "ctxlab.defaults", "ctxlab.errors", "ctxlab.levels"},
    "ctxlab.harness": {"ctxlab.claim", "ctxlab.cuda", "ctxlab.lab", "ctxlab.levels", "ctxlab.records",
                       "ctxlab.tracing", "ctxlab.version"},
    "ctxlab.labs": {"ctxlab.claim", "ctxlab.cuda", "ctxlab.harness", "ctxlab.lab", "ctxlab.records", "ctxlab.tracing"},
    "ctxlab.suite": {"ctxlab.harness", "ctxlab.lab", "ctxlab.labs", "ctxlab.levels", "ctxlab.records", "ctxlab.report",
                     "ctxlab.tracing"},
    "ctxlab.api": {"ctxlab.audit", "ctxlab.claim", "ctxlab.cuda", "ctxlab.defaults", "ctxlab.errors", "ctxlab.harness",
                   "ctxlab.lab", "ctxlab.labs", "ctxlab.records", "ctxlab.report", "ctxlab.suite", "ctxlab.tracing"},
    "ctxlab.cli": {"ctxlab.api", "ctxlab.audit", "ctxlab.claim", "ctxlab.cuda", "ctxlab.defaults", "ctxlab.errors",
                   "ctxlab.interrupts", "ctxlab.lab", "ctxlab.labs", "ctxlab.output", "ctxlab.records",
                   "ctxlab.report", "ctxlab.suite", "ctxlab.tracing", "ctxlab.version"},
    "ctxlab.__main__": {"ctxlab.cli", "ctxlab.interrupts"},
    "ctxlab.entry": {"ctxlab.cli"},  # the console script: signal handlers first, then the command line
    "ctxlab": {"ctxlab.api", "ctxlab.version"},  # the package's __init__: the API
}


def part_of(module: str) -> str:
    """The part of the house a module belongs to: ``ctxlab`` (the package's ``__init__``), a top-level module,
    or a top-level package with everything under it."""
    return ".".join(module.split(".")[:2])


# The audit inside, as the layers it is: the vocabulary and the recorded stream at the bottom, what runs in the
# traced child and the models above them, the rules (queries on the models) above those, the report and the
# guard, and at the top the audit's run and the pytest plugin. A part is a module of ctxlab.audit or a folder of it.
AUDIT_LAYERS: dict[str, set[str]] = {
    "ctxlab.audit.events": set(),  # the one vocabulary
    "ctxlab.audit.engine": set(),  # the stream, hits, findings
    "ctxlab.audit.child": {"ctxlab.audit.events"},
    "ctxlab.audit.model": {"ctxlab.audit.events", "ctxlab.audit.engine"},
    "ctxlab.audit.rules": {"ctxlab.audit.events", "ctxlab.audit.engine", "ctxlab.audit.child", "ctxlab.audit.model"},
    "ctxlab.audit.report": {"ctxlab.audit.engine", "ctxlab.audit.rules"},
    "ctxlab.audit.guard": {"ctxlab.audit.engine", "ctxlab.audit.rules"},
    "ctxlab.audit.run": {"ctxlab.audit.engine", "ctxlab.audit.child", "ctxlab.audit.model", "ctxlab.audit.rules",
                         "ctxlab.audit.report"},
    "ctxlab.audit.pytest_plugin": {"ctxlab.audit.child", "ctxlab.audit.model", "ctxlab.audit.guard"},
    "ctxlab.audit": set(),  # its __init__ loads its names lazily
}


def audit_part(module: str) -> str:
    """The layer of the audit a module belongs to: a module of ctxlab.audit, or a folder of it."""
    return ".".join(module.split(".")[:3])


def unallowed(graph: dict[str, set[str]], allowed: dict[str, set[str]] = ALLOWED, part=None) -> list[str]:
    """Every import between two parts the graph does not allow, and every part it does not know."""
    part_of_module = part or part_of
    out = [f"{p} is not in the graph" for p in sorted({part_of_module(m) for m in graph}) if p not in allowed]
    for module, targets in sorted(graph.items()):
        here = part_of_module(module)
        for target in sorted(targets):
            there = part_of_module(target)
            if here != there and here in allowed and there not in allowed[here]:
                out.append(f"{module} imports {target}: {here} may not import {there}")
    return out


def modules_of(package: Path) -> dict[str, Path]:
    """Every module under ``package`` by its dotted name (a package by its own name, not ``.__init__``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _targets(name: str, path: Path, node: ast.AST, known: dict[str, Path]) -> list[str]:
    """The modules of ``known`` that one import statement of module ``name`` takes something from: ``from p
    import m`` takes module ``p.m`` where there is one, and ``p`` itself (its ``__init__``) for any other name."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: from the module's package, one level up per extra dot
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
    from_init = len(submodules) < len(node.names) and base in known
    return [*submodules, *([base] if from_init else [])]


def import_graph(package: Path) -> dict[str, set[str]]:
    """Which of the package's modules each module imports: every import statement, at module level, inside
    functions or under ``if TYPE_CHECKING`` alike. A name taken from the package a module lies inside (its
    ``__init__``) is an edge too: that is the arrow back up the tree."""
    known = modules_of(package)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(name, path, node, known):
                if target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import circles: each strongly connected set of two or more modules (Tarjan's algorithm,
    iterative so that a deep chain of imports cannot exhaust the stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(frozenset(members))
    return found


def line_count(path: Path) -> int:
    """Lines as ``wc -l`` and the imports tool count them."""
    with path.open(encoding="utf-8") as handle:
        return sum(1 for _ in handle)


# The rules on ctxlab itself


def test_no_import_circle_among_ctxlabs_modules():
    found = set(circles(import_graph(PACKAGE)))
    new = sorted(" <-> ".join(sorted(c)) for c in found - KNOWN_CIRCLES)
    assert not new, f"import circles (break them: move what both need into a lower module): {new}"


def test_the_known_circles_only_shrink():
    ended = sorted(" <-> ".join(sorted(c)) for c in KNOWN_CIRCLES - set(circles(import_graph(PACKAGE))))
    assert not ended, f"these circles are gone or changed: update KNOWN_CIRCLES (it may only shrink): {ended}"


def test_every_import_is_an_arrow_the_graph_allows():
    assert unallowed(import_graph(PACKAGE)) == []


def test_the_graph_has_no_circle_so_it_still_reads_bottom_to_top():
    assert circles({part: set(targets) for part, targets in ALLOWED.items()}) == []


def audit_graph(package: Path) -> dict[str, set[str]]:
    """The imports among the audit's own modules."""
    return {m: {t for t in targets if t.startswith("ctxlab.audit")}
            for m, targets in import_graph(package).items() if m.startswith("ctxlab.audit")}


def test_the_audit_is_laid_out_as_its_layers_and_imports_only_downwards():
    graph = audit_graph(PACKAGE)
    assert unallowed(graph, AUDIT_LAYERS, audit_part) == []
    assert circles({part: set(targets) for part, targets in AUDIT_LAYERS.items()}) == []
    assert {audit_part(m) for m in graph} == set(AUDIT_LAYERS)  # every layer holds something


def test_an_audit_import_up_a_layer_is_found(tmp_path):
    package = tmp_path / "ctxlab"
    for folder in ("audit", "audit/model", "audit/child"):
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "audit" / "events.py").write_text("")
    (package / "audit" / "model" / "state.py").write_text("from ctxlab.audit.events import X\n")
    (package / "audit" / "child" / "observe.py").write_text("from ctxlab.audit.model.state import model\n")
    found = unallowed(audit_graph(package), AUDIT_LAYERS, audit_part)
    assert found == ["ctxlab.audit.child.observe imports ctxlab.audit.model.state: ctxlab.audit.child may not "
                     "import ctxlab.audit.model"]


def test_no_module_takes_a_name_from_a_package_it_lies_inside():
    graph = import_graph(PACKAGE)
    back = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets if m.startswith(t + "."))
    assert back == [], back


def test_a_planted_wrong_arrow_a_back_arrow_and_an_unknown_part_are_found(tmp_path):
    package = tmp_path / "ctxlab"
    (package / "records").mkdir(parents=True)
    (package / "report").mkdir()
    (package / "__init__.py").write_text("__version__ = '1'\n")
    (package / "records" / "__init__.py").write_text("")
    (package / "records" / "model.py").write_text("from ctxlab.api import check\n")  # the bottom reaching up
    (package / "report" / "__init__.py").write_text("")
    (package / "report" / "sarif.py").write_text("from ctxlab import __version__\nfrom ctxlab.report import x\n")
    (package / "api.py").write_text("from ctxlab.records import model\n")
    (package / "extra.py").write_text("")
    graph = import_graph(package)
    found = unallowed(graph)
    assert "ctxlab.records.model imports ctxlab.api: ctxlab.records may not import ctxlab.api" in found
    assert "ctxlab.report.sarif imports ctxlab: ctxlab.report may not import ctxlab" in found  # the back-arrow
    assert "ctxlab.extra is not in the graph" in found
    assert not any(line.startswith("ctxlab.api ") for line in found)  # down is allowed
    assert graph["ctxlab.report.sarif"] == {"ctxlab", "ctxlab.report"}  # a name from its own package counts
    assert circles({"a": {"b"}, "b": {"a"}}) == [frozenset({"a", "b"})]


def test_no_module_over_500_lines():
    long = {str(path.relative_to(ROOT)): n for path in modules_of(PACKAGE).values()
            if (n := line_count(path)) > MAX_LINES}
    new = {name: n for name, n in sorted(long.items()) if name not in TOO_LONG}
    assert not new, f"modules over {MAX_LINES} lines (split them into modules with one job each): {new}"


def test_the_long_list_only_shrinks():
    stale = sorted(name for name in TOO_LONG
                   if not (ROOT / name).is_file() or line_count(ROOT / name) <= MAX_LINES)
    assert not stale, f"no longer over {MAX_LINES} lines: remove them from TOO_LONG (it may only shrink): {stale}"


# The graph and circle functions, on a tiny package made for each test


def make_package(root: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``root`` with these files (paths relative to it), each ``__init__.py`` added."""
    package = root / "pkg"
    for relative, text in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in [path.parent, *path.parent.parents]:
            if folder == root:
                break
            (folder / "__init__.py").touch()
        path.write_text(text)
    return package


def test_a_planted_circle_is_found(tmp_path):
    package = make_package(tmp_path, {"a.py": "from pkg.b import x\n", "b.py": "from pkg import c\n",
                                      "c.py": "def f():\n    from pkg.a import y\n", "d.py": "import pkg.a\n"})
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"}
    assert circles(graph) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]  # d imports into it, outside it


@pytest.mark.parametrize("a, b", [
    ("from pkg.b import x\n", "from pkg.a import y\n"),                       # both at module level
    ("def f():\n    from pkg.b import x\n", "from pkg.a import y\n"),         # one inside a function
    ("from .b import x\n", "def g():\n    from . import a\n"),                # relative imports
    ("import pkg.b\n", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import T\n"),
])
def test_every_kind_of_import_closes_a_circle(tmp_path, a, b):
    graph = import_graph(make_package(tmp_path, {"a.py": a, "b.py": b}))
    assert circles(graph) == [frozenset({"pkg.a", "pkg.b"})]


def test_subpackages_and_their_parents(tmp_path):
    package = make_package(tmp_path, {
        "__init__.py": "def later():\n    from pkg import api\n",
        "api.py": "from pkg.sub import leaf\n",
        "sub/__init__.py": "",
        "sub/leaf.py": "from pkg import sub\nfrom .. import api\n",  # its own package's __init__: an edge too
    })
    graph = import_graph(package)
    assert graph["pkg.sub.leaf"] == {"pkg.api", "pkg.sub"}
    assert graph["pkg.api"] == {"pkg.sub.leaf"}  # a submodule named in a from-import: that module only
    assert graph["pkg"] == {"pkg.api"}
    assert circles(graph) == [frozenset({"pkg.api", "pkg.sub.leaf"})]


def test_no_circle_in_a_layered_package(tmp_path):
    package = make_package(tmp_path, {"low.py": "import json\n", "mid.py": "from pkg.low import x\n",
                                      "top.py": "from pkg import mid\nfrom pkg.low import y\n"})
    assert circles(import_graph(package)) == []


def test_a_long_planted_module_is_counted(tmp_path):
    package = make_package(tmp_path, {"big.py": "x = 1\n" * (MAX_LINES + 1), "small.py": "y = 2\n"})
    counts = {name: line_count(path) for name, path in modules_of(package).items()}
    assert counts["pkg.big"] == MAX_LINES + 1 > MAX_LINES >= counts["pkg.small"]
