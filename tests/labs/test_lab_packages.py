"""Every lab is a package (issue 24): ``claims.py`` judged on the CPU, pure (no CUDA, no harness), and
``scenarios.py`` run in children; ctxlab's own modules are imported at the top, and only the libraries that load
CUDA (or numpy, for the CPU time of the parent) inside functions. Every registered lab has its claim cases and
its write-up; the pages that list labs agree with the registry."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctxlab.labs import LABS, get_lab

ROOT = Path(__file__).resolve().parents[2]
LABS_DIR = ROOT / "ctxlab" / "labs"
CUDA_LIBRARIES = ("cupy", "cuda", "cupti", "numba", "torch", "jax", "jaxlib")
LOADED_IN_FUNCTIONS = (*CUDA_LIBRARIES, "numpy")


def _imports(path: Path) -> list[tuple[ast.AST, str, bool]]:
    """Each import of a module: (node, the module imported, whether it sits inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside = {id(node) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
              for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name, id(node) in inside) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node, node.module or "", id(node) in inside))
    return found


def _claims_modules() -> list[Path]:
    return sorted([*LABS_DIR.glob("*/claims.py"), *LABS_DIR.glob("*/*_claims.py")])


@pytest.mark.parametrize("name", list(LABS))
def test_every_lab_is_a_package_of_claims_and_scenarios(name):
    package = LABS_DIR / name
    assert (package / "__init__.py").is_file() and (package / "claims.py").is_file(), name
    assert (package / "scenarios.py").is_file(), name
    lab = get_lab(name)
    assert lab.claims == importlib.import_module(f"ctxlab.labs.{name}.claims").CLAIMS
    # Every scenario names a function of the lab's own modules (or another lab's) that a child can import.
    for scenario in lab.scenarios(lab.options()):
        module, _, function = scenario.target.partition(":")
        assert module.startswith("ctxlab.labs."), scenario
        assert callable(getattr(importlib.import_module(module), function)), scenario


@pytest.mark.parametrize("path", _claims_modules(), ids=lambda p: str(p.relative_to(LABS_DIR)))
def test_claims_modules_are_pure(path):
    """A claims module imports the claim model, the records, its own lab's modules and the documentation texts
    that ctxlab.cuda.green keeps for the claims (SOURCE_*), nothing that runs CUDA."""
    lab = path.relative_to(LABS_DIR).parts[0]
    for node, module, _ in _imports(path):
        if module == "ctxlab.cuda.green":
            assert isinstance(node, ast.ImportFrom) and all(a.name.startswith("SOURCE_") for a in node.names)
            continue
        root = module.split(".")[0]
        assert root not in CUDA_LIBRARIES, (path, module)
        if root == "ctxlab":
            assert module in ("ctxlab.claim", "ctxlab.records.model") or module.startswith(f"ctxlab.labs.{lab}"), \
                (path, module)


# The registry (ctxlab/labs/__init__.py) is read by the CLI at start-up: it loads the lab model only with a lab.
@pytest.mark.parametrize("path", sorted(set(LABS_DIR.rglob("*.py")) - {LABS_DIR / "__init__.py"}),
                         ids=lambda p: str(p.relative_to(LABS_DIR)))
def test_only_cuda_libraries_are_imported_inside_functions(path):
    inside = [module for _, module, in_function in _imports(path) if in_function]
    assert all(module.split(".")[0] in LOADED_IN_FUNCTIONS for module in inside), (path, inside)


def test_loading_every_lab_loads_no_cuda_library():
    """The labs' modules import ctxlab's own at the top, and none of those loads a CUDA library (the test of
    ``import ctxlab`` and ``--help`` is tests/cli/test_import_light.py; this one loads every lab as well)."""
    probe = ("import json, sys\nfrom ctxlab.labs import LABS, get_lab\nlabs = [get_lab(n) for n in LABS]\n"
             f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {CUDA_LIBRARIES!r})\n"
             "print(json.dumps(heavy))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                          cwd=ROOT)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_every_lab_has_claim_cases():
    for name in LABS:
        assert (ROOT / "tests" / "claim_cases" / f"{name}.py").is_file(), f"add tests/claim_cases/{name}.py"


def test_every_lab_has_its_write_up_and_the_pages_that_list_labs_agree_with_the_registry():
    """A lab's page is its write-up, labs/<lab>.md, and ``ctxlab --help`` lists every lab from the registry, so
    adding a lab edits no other page: the README's and labs/README.md's tables are a tour that may leave a lab
    out, but every row they have names a command that exists and a lab's row links that lab's write-up;
    docs/schema.md names the registry rather than listing the labs."""
    from ctxlab.cli import cli

    for name in LABS:
        write_up = ROOT / "labs" / f"{name}.md"
        assert write_up.is_file(), f"labs/{name}.md: the lab's write-up"
        assert write_up.read_text(encoding="utf-8").startswith(f"# {name}: "), f"labs/{name}.md: its title"
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    rows = [line for line in readme if re.match(r"\| `ctxlab [\w-]+` \|", line)]  # the commands' table
    assert rows
    for row in rows:
        command = row.split("`")[1].split()[1]
        assert command in cli.commands, f"README.md: a row for `ctxlab {command}`, which is no command"
        assert command not in LABS or f"[labs/{command}.md](labs/{command}.md)" in row, row
    labs_readme = (ROOT / "labs" / "README.md").read_text(encoding="utf-8").splitlines()
    named = [(row, command) for row in labs_readme if row.startswith("|")
             for command in re.findall(r"`ctxlab ([\w-]+)", row)]
    assert named
    for row, command in named:
        assert command in cli.commands, f"labs/README.md: a row for `ctxlab {command}`, which is no command"
        assert command not in LABS or f"({command}.md)" in row, row
    schema = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    (lab_row,) = [line for line in schema.splitlines() if line.startswith("| `lab` | string |")]
    assert "`ctxlab/labs/__init__.py`" in lab_row
