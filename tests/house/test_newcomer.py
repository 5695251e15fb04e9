"""What a newcomer meets (issue 38): README's table of skipped tests lists every kind of skip the suite has;
an older Python is told at once that 3.11 is needed, before pip resolves anything; the README's two commands
each make their own venv, and .ci/run runs the test command exactly."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# Each kind of skip: what its reason says, and what README's table says it needs (the "needs" column).
KINDS = [
    (r"^no GPU: ", "an NVIDIA GPU"),
    (r"check would run the labs, not drain|slurm-wlm munge|^slurmd runs as root", "Slurm with munge, as root, no GPU"),
    (r"^a GPU is present", "no GPU"),
    (r"^no C compiler here", "a C compiler"),
    (r"^no Chromium installed", "a Chromium"),
    (r"^Playwright is not installed", "Playwright"),
    (r"^tmux is not installed", "tmux"),
    (r"^cuda-bindings is not installed", "cuda-bindings"),
    (r"^needs shellcheck", "shellcheck"),
    (r"^needs prometheus and prometheus-node-exporter", "Prometheus and node_exporter"),
    (r"\bLinux\b|^needs /proc/|^no os\.fork here|/dev/shm|^cannot make a device node|does not exist here$"
     r"|no CPU affinity", "Linux"),
    (r"^CTXLAB_SKIP_ALONE=1", "CTXLAB_SKIP_ALONE"),
    (r"^\{\} is not installed here$", "the library"),
    (r"^needs (2|\{\}) GPUs", "two GPUs"),
    (r"^numba-cuda cannot compile kernels with this numpy", "a NumPy numba-cuda compiles with"),
    (r"^no expectations for ", "recorded expectations"),
    (r"^needs the package index for setuptools", "the package index"),
    (r"^no known frame layout for this Python", "CPython 3.11 or 3.12"),
]
# Skips that cannot happen where ctxlab installs: the standard library's tomllib is there from 3.11 on.
NEVER = ["could not import tomllib"]


def _text(node: ast.AST) -> str | None:
    """A reason as written, with {} where an f-string fills a value in; None where it is not a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def skip_reasons() -> list[tuple[str, str | None]]:
    """(file:line, reason) of every skip, skipif and importorskip under tests/."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            if name not in ("skip", "skipif", "importorskip"):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            if "reason" in keywords:
                reason = _text(keywords["reason"])
            elif name == "skip" and node.args:
                reason = _text(node.args[0])
            elif name == "importorskip" and node.args:
                reason = f"could not import {_text(node.args[0])}"  # pytest's own words
            else:
                reason = None
            found.append((f"{path.relative_to(ROOT)}:{node.lineno}", reason))
    return found


def table_needs() -> list[str]:
    lines = README[README.index("| skipped | needs | install |"):].splitlines()[2:]
    rows = [line for line in lines[:next(i for i, line in enumerate(lines) if not line.startswith("|"))]]
    return [row.split(" | ")[1] for row in rows]


def test_the_skip_reasons_are_found():
    reasons = dict(skip_reasons())
    gpu_skip = next(n for n, line in enumerate((ROOT / "tests/conftest.py").read_text().splitlines(), 1)
                    if 'reason=f"no GPU: {absent}"' in line)
    assert len(reasons) > 30 and f"tests/conftest.py:{gpu_skip}" in reasons  # the gpu marker's skip, at collection


def test_every_kind_of_skip_in_the_suite_is_a_row_of_the_readme_table():
    needs = table_needs()
    unread = [where for where, reason in skip_reasons() if reason is None]
    assert not unread, f"skips whose reason is not written out: {unread}"
    unknown = [(where, reason) for where, reason in skip_reasons()
               if reason not in NEVER and not any(re.search(pattern, reason or "") for pattern, _ in KINDS)]
    assert not unknown, f"skips README's table does not list (add a row, and its kind to KINDS): {unknown}"
    for _, need in KINDS:
        assert any(need in cell for cell in needs), f"README's table has no row that needs {need!r}"


def test_every_row_of_the_readme_table_is_a_kind_of_skip_the_suite_has():
    used = {need for where, reason in skip_reasons() for pattern, need in KINDS if re.search(pattern, reason or "")}
    for cell in table_needs():
        assert any(need in cell for need in used), f"a row of README's table no test skips for: {cell!r}"


def commands() -> tuple[str, str]:
    blocks = [b.strip() for b in re.findall(r"```\n(.*?)\n```", README, re.S) if "pip install" in b]
    return blocks[0], blocks[1]


def test_the_two_commands_make_venvs_of_their_own_and_git_ignores_both():
    venvs = [re.match(r"python3 -m venv (\S+) && \. (\S+)/bin/activate && ", c) for c in commands()]
    assert all(m and m[1] == m[2] for m in venvs)
    main, tests = (m[1] for m in venvs if m)
    assert main != tests
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert f"{main}/" in ignored and f"{tests}/" in ignored


def test_ci_runs_exactly_the_readme_test_command():
    script = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
              if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert script == [commands()[1]]


def backend():
    system = PYPROJECT["build-system"]
    assert system["requires"] == []  # nothing to resolve before the backend's first hook runs
    (folder,) = system["backend-path"]
    spec = importlib.util.spec_from_file_location(system["build-backend"],
                                                  ROOT / folder / f"{system['build-backend']}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_backend_needs_the_python_pyproject_names():
    wanted = PYPROJECT["project"]["requires-python"]
    assert wanted == ">=" + ".".join(map(str, backend().REQUIRED))


@pytest.mark.parametrize("hook", ["get_requires_for_build_editable", "get_requires_for_build_wheel",
                                  "get_requires_for_build_sdist"])
def test_an_older_python_is_told_in_one_line_before_anything_is_resolved(hook, monkeypatch):
    module = backend()
    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    monkeypatch.setattr(module, "_setuptools", lambda: pytest.fail("setuptools asked for before the check"))
    with pytest.raises(SystemExit) as stopped:
        getattr(module, hook)()
    message = str(stopped.value.code)
    assert message.startswith("ctxlab needs Python 3.11 or newer; this is Python 3.10.13") and "\n" not in message


def test_a_new_enough_python_gets_setuptools_then_what_setuptools_asks_for(monkeypatch):
    module = backend()

    class Setuptools:
        @staticmethod
        def get_requires_for_build_wheel(config_settings):
            return ["wheel"]

    def absent():
        raise ImportError("No module named 'setuptools'")

    monkeypatch.setattr(module, "_setuptools", absent)  # a fresh build environment
    assert module.get_requires_for_build_wheel() == ["setuptools>=70.1"]
    monkeypatch.setattr(module, "_setuptools", lambda: Setuptools)
    assert module.get_requires_for_build_wheel() == ["setuptools>=70.1", "wheel"]


def test_the_declared_setuptools_floor_builds_the_wheel(tmp_path):
    """The floor the backend asks for is true: a build environment holding exactly that setuptools (and
    nothing else) builds ctxlab's wheel (setuptools 68 to 70.0 could not: no bdist_wheel without wheel)."""
    floor = backend().SETUPTOOLS.split(">=")[1]
    env_dir = tmp_path / "floor"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    python = str(env_dir / "bin" / "python")
    got = subprocess.run([python, "-m", "pip", "install", "-q", f"setuptools=={floor}"], capture_output=True,
                         text=True, timeout=300)
    if got.returncode != 0:
        pytest.skip(f"needs the package index for setuptools=={floor}: {got.stderr.strip().splitlines()[-1:]}")
    built = subprocess.run([python, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                            str(tmp_path / "out"), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    assert [p.name.split("-")[0] for p in (tmp_path / "out").iterdir()] == ["ctxlab"]
