"""The tree's shape (issue 24, "House 2.0"): no import circle among ctxlab's modules, no import that climbs
back up a layer (LAYERS), and no module over 500 lines, except the explicit lists below of what is still to
be split or untangled.

Both lists may only shrink: a test fails when an entry no longer needs to be there, so that the fix is
recorded as the new rule. Never add to them; split the module or break the circle instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ctxlab"
MAX_LINES = 500

# Modules over MAX_LINES today. This list may only shrink: remove a module once it is split. (Empty since the
# labs became packages, issue 24.)
TOO_LONG: set[str] = set()

# Import circles still there today, each as the exact set of its modules. This list may only shrink. (Empty since
# the interop lab's helpers moved into ctxlab/labs/interop/libs.py, issue 24.)
KNOWN_CIRCLES: set[frozenset[str]] = set()


# The layers, bottom first (../README's part list): a module may import its own layer's modules and those of
# the layers below, never one above. A module is in the layer of the longest prefix naming it (``ctxlab``
# itself names only the package's ``__init__``).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("records", ("ctxlab.version", "ctxlab.errors", "ctxlab.defaults", "ctxlab.levels", "ctxlab.records",
                 "ctxlab.schema", "ctxlab.interrupts")),
    ("CUDA helpers and claims", ("ctxlab.cuda", "ctxlab.claim", "ctxlab.calling", "ctxlab.envrecord")),
    # tracing: the C callback, its records and fields, the stacks, the tracer, the flight recorder, the child
    ("tracing", ("ctxlab.tracing", "ctxlab.trace")),
    ("reports", ("ctxlab.report",)),
    ("audit", ("ctxlab.audit",)),
    ("lab model and harness", ("ctxlab.lab", "ctxlab.harness")),
    ("labs", ("ctxlab.labs",)),
    ("API", ("ctxlab.suite", "ctxlab.api", "ctxlab.record", "ctxlab.loading", "ctxlab.shapes", "ctxlab.output",
             "ctxlab.fleet_status")),
    ("CLI", ("ctxlab.cli", "ctxlab.__main__", "ctxlab")),
]


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> int | None:
    """The index in ``layers`` of the layer ``module`` is in (None: none names it)."""
    best: tuple[int, int] | None = None
    for index, (_name, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if module == prefix or (prefix != "ctxlab" and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return best[0] if best else None


def climbs(graph: dict[str, set[str]], layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> list[str]:
    """Every import of a module in a higher layer, and every module no layer names."""
    out = [f"{m} is in no layer" for m in sorted(graph) if layer_of(m, layers) is None]
    for module, targets in sorted(graph.items()):
        here = layer_of(module, layers)
        for target in sorted(targets):
            there = layer_of(target, layers)
            if here is not None and there is not None and there > here:
                out.append(f"{module} ({layers[here][0]}) imports {target} ({layers[there][0]})")
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
    """The modules of ``known`` that one import statement of module ``name`` loads."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: from the module's package, one level up per extra dot
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, *([base] if base else [])])
        wanted = [base, *(f"{base}.{alias.name}" for alias in node.names)]  # a name may be a submodule
    else:
        return []
    return [target for target in wanted if target in known]


def import_graph(package: Path) -> dict[str, set[str]]:
    """Which of the package's modules each module imports: every import statement, at module level, inside
    functions or under ``if TYPE_CHECKING`` alike. A module importing a package it lies inside is no edge:
    Python has run that package's ``__init__`` before the module."""
    known = modules_of(package)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(name, path, node, known):
                if target != name and not name.startswith(target + "."):
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


def test_no_import_climbs_back_up_a_layer():
    assert climbs(import_graph(PACKAGE)) == []


def test_a_planted_climb_and_an_unlayered_module_are_found(tmp_path):
    package = tmp_path / "ctxlab"
    (package / "records").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "records" / "__init__.py").write_text("")
    (package / "records" / "model.py").write_text("from ctxlab.api import check\n")  # the bottom reaching up
    (package / "api.py").write_text("from ctxlab.records import model\n")
    (package / "extra.py").write_text("")
    found = climbs(import_graph(package))
    assert "ctxlab.records.model (records) imports ctxlab.api (API)" in found
    assert "ctxlab.extra is in no layer" in found
    assert not any(line.startswith("ctxlab.api ") for line in found)  # down is allowed


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
        "sub/leaf.py": "from pkg import sub\nfrom .. import api\n",  # its own package: no edge; api: one
    })
    graph = import_graph(package)
    assert graph["pkg.sub.leaf"] == {"pkg.api"}
    assert graph["pkg.api"] == {"pkg.sub", "pkg.sub.leaf"}
    assert circles(graph) == [frozenset({"pkg.api", "pkg.sub.leaf"})]


def test_no_circle_in_a_layered_package(tmp_path):
    package = make_package(tmp_path, {"low.py": "import json\n", "mid.py": "from pkg.low import x\n",
                                      "top.py": "from pkg import mid\nfrom pkg.low import y\n"})
    assert circles(import_graph(package)) == []


def test_a_long_planted_module_is_counted(tmp_path):
    package = make_package(tmp_path, {"big.py": "x = 1\n" * (MAX_LINES + 1), "small.py": "y = 2\n"})
    counts = {name: line_count(path) for name, path in modules_of(package).items()}
    assert counts["pkg.big"] == MAX_LINES + 1 > MAX_LINES >= counts["pkg.small"]
