"""Every lab is a package (issue 24): ``claims.py`` judged on the CPU, pure (no CUDA, no harness), and
``scenarios.py`` run in children; ctxlab's own modules are imported at the top, and only the libraries that load
CUDA (or numpy, for the CPU time of the parent) inside functions. Every registered lab has its claim cases, and
docs/schema.md and the README tables name it."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxlab.labs import LABS, get_lab

ROOT = Path(__file__).resolve().parent.parent
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
    ``import ctxlab`` and ``--help`` is tests/test_import_light.py; this one loads every lab as well)."""
    probe = ("import json, sys\nfrom ctxlab.labs import LABS, get_lab\nlabs = [get_lab(n) for n in LABS]\n"
             f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {CUDA_LIBRARIES!r})\n"
             "print(json.dumps(heavy))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                          cwd=ROOT)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_every_lab_has_claim_cases():
    for name in LABS:
        assert (ROOT / "tests" / "claim_cases" / f"{name}.py").is_file(), f"add tests/claim_cases/{name}.py"


def test_the_schema_page_and_the_readme_tables_name_every_lab():
    schema = (ROOT / "docs" / "schema.md").read_text(encoding="utf-8")
    lab_rows = [line for line in schema.splitlines() if line.startswith("| `lab` |")]
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    labs_readme = (ROOT / "labs" / "README.md").read_text(encoding="utf-8").splitlines()
    for name in LABS:
        assert any(f"`{name}`" in row for row in lab_rows), f"docs/schema.md: no `lab` row names {name}"
        assert any(line.startswith(f"| `ctxlab {name}` |") and f"labs/{name}.md" in line for line in readme), \
            f"README.md: no row for `ctxlab {name}` with its write-up labs/{name}.md"
        assert any(line.startswith("|") and f"`ctxlab {name}" in line and f"({name}.md)" in line
                   for line in labs_readme), f"labs/README.md: no row for ctxlab {name} with {name}.md"
        assert (ROOT / "labs" / f"{name}.md").is_file(), f"labs/{name}.md: the lab's write-up"
