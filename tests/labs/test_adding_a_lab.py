"""A new lab in at most six files (issue 37): a throwaway lab written into a temporary folder as
docs/adding-a-lab.md says (its package of three files, its claim cases, its write-up) and the one line of the
registry. Its command shows its question and help, running it judges its claim, ``check`` and ``claims`` find it,
``ctxlab --help`` lists it with its registry line without importing it, and its cases make its promise fail:
no other file was edited.

The package is a top-level one in the temporary folder (``childenv``, not ``ctxlab.labs.childenv``: tests do not
write into the source tree); its one scenario needs no GPU.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ctxlab
import ctxlab.cli
import ctxlab.labs
from ctxlab.cli import cli
from ctxlab.cli.labs import lab_commands
from ctxlab.labs import LabEntry
from tests.hostile import invoke

ROOT = Path(__file__).resolve().parents[2]
NAME = "childenv"
SUMMARY = "Show whether a scenario's child process sees the environment its scenario sets."
QUESTION = "Does a scenario's child process see the environment variables its scenario sets?"
REGISTRY_FILE = "ctxlab/labs/__init__.py"

# The five new files, by their place in the checkout (docs/adding-a-lab.md's table); the package's own folder is
# ``<lab>/`` in the temporary folder rather than ``ctxlab/labs/<lab>/``.
FILES = {
    "ctxlab/labs/<lab>/__init__.py": r'''
        """The childenv lab: its question, help, options and claims (``LAB``); the scenarios load when it runs."""

        from __future__ import annotations

        from dataclasses import dataclass, field

        from childenv import claims
        from ctxlab.lab import Lab, LabOptions, bounded, scenarios_in

        # The help of ``ctxlab childenv`` below its question: examples, then what it runs.
        HELP = """\b
          ctxlab childenv
          ctxlab childenv --value 42 --format json -o childenv.json

        Sets CTXLAB_CHILDENV in its scenario's environment and records what the
        scenario's child process reads. Needs no GPU.
        """


        @dataclass(frozen=True)
        class ChildEnvOptions(LabOptions):
            """childenv's options: those every lab takes, and the value its scenario sets."""

            value: int = field(default=7, metadata=bounded(0, 99, "The value the scenario sets in its child's "
                                                                  "environment."))


        LAB = Lab(claims.NAME, "QUESTION", ChildEnvOptions, claims.CLAIMS, scenarios_in(f"{__name__}.scenarios"),
                  help=HELP, needs_gpu=False)  # no scenario of it touches a GPU
    ''',
    "ctxlab/labs/<lab>/claims.py": r'''
        """childenv's claims: the source, the facts read from the observations, the predicate and the evidence."""

        from __future__ import annotations

        from ctxlab.claim import Claim, Observations, one

        NAME = "childenv"
        SCENARIO_ENV = "ctxlab.lab.Scenario: env is set in the child before the scenario runs (harness/isolate.py)"


        def facts_env(obs: Observations) -> dict:
            """The value the scenario set and what its child read."""
            v = one(obs, "environment", "read-env").value
            return {"set": v["set"], "read": v["read"]}


        CLAIMS = (
            Claim("childenv.child-sees-env", "A scenario's child sees the environment variables the scenario sets.",
                  SCENARIO_ENV, "promise", ("read-env",), facts_env, "set to {set}; the child read {read}",
                  lambda f: f["read"] == str(f["set"])),
        )
    ''',
    "ctxlab/labs/<lab>/scenarios.py": r'''
        """childenv's scenarios, each run in a child process, and the lab's list of them."""

        from __future__ import annotations

        import os

        from childenv import ChildEnvOptions
        from ctxlab.harness.recorder import Recorder
        from ctxlab.lab import Isolation, Scenario
        from ctxlab.labs.common import scenario_output

        VARIABLE = "CTXLAB_CHILDENV"


        def read_env(value: int) -> dict:
            """What the child reads of the variable its scenario set to ``value``."""
            rec = Recorder(scenario="read-env")  # no context to stamp: the lab makes no CUDA call
            rec.add("read", "environment", {"set": value, "read": os.environ.get(VARIABLE)})
            return scenario_output(rec)


        def scenarios(options: ChildEnvOptions) -> list[Scenario]:
            """Every scenario of the lab for these options."""
            # A new interpreter, which gets the parent's sys.path with this package's folder on it (a forkserver
            # that an earlier test started has not).
            return [Scenario("read-env", read_env, (options.value,), env={VARIABLE: str(options.value)},
                             isolation=Isolation.FRESH, timeout=60)]
    ''',
    "tests/claim_cases/<lab>.py": r'''
        """Cases for the childenv lab's claim, from observations written here (see tests/claim_cases/__init__.py)."""

        from ctxlab.records.model import Observation
        from tests.claim_cases import Case, edit

        RUN = [Observation("read", "MainThread", None, "environment", {"set": 7, "read": "7"}, scenario="read-env")]

        CASES: dict[str, Case] = {
            "childenv.child-sees-env": Case(RUN, breaks=[
                edit("environment", "read-env", read=None),  # the child did not see it
                edit("environment", "read-env", read="8"),  # it saw another value
            ]),
        }
    ''',
    "labs/<lab>.md": '''
        # childenv: does a scenario's child see its environment?

        The question is `ctxlab childenv --help`'s. One scenario, `read-env`, sets
        `CTXLAB_CHILDENV` and its child reads it back: the promise
        `childenv.child-sees-env` holds (set to 7; the child read 7).
    ''',
}


def placed(path: str) -> str:
    """Where a file of the checkout goes in the temporary folder."""
    return path.replace("ctxlab/labs/<lab>/", "<lab>/").replace("<lab>", NAME)


def doc_files() -> list[str]:
    """The files docs/adding-a-lab.md's table says a lab is made of."""
    text = (ROOT / "docs" / "adding-a-lab.md").read_text(encoding="utf-8")
    table = text.split("| file | what it holds |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", table, re.M)


@pytest.fixture
def new_lab(tmp_path, monkeypatch):
    """The throwaway lab: its five files written, its registry line added; returns the files written."""
    for path, text in FILES.items():
        target = tmp_path / placed(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip().replace('"QUESTION"', repr(QUESTION)), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(ctxlab.labs.LABS, NAME, LabEntry(NAME, SUMMARY))  # the registry's one line
    # ctxlab.cli made its commands from the registry when it was imported (the command list test below imports
    # it afresh after the line is added); here the command is made the same way, once the line is there.
    (command,) = [c for c in lab_commands(lambda *args, **kwargs: ctxlab.cli.run_lab(*args, **kwargs))
                  if c.name == NAME]
    monkeypatch.setitem(cli.commands, NAME, command)
    # tests/labs/test_claims_can_fail.py imports tests.claim_cases.<lab> for every registered lab: this one's is here
    spec = importlib.util.spec_from_file_location(f"tests.claim_cases.{NAME}", tmp_path / placed(
        "tests/claim_cases/<lab>.py"))
    assert spec and spec.loader
    cases = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, cases)
    spec.loader.exec_module(cases)
    yield sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()
                 and "__pycache__" not in p.parts)
    for module in [m for m in sys.modules if m == NAME or m.startswith(f"{NAME}.")]:
        del sys.modules[module]


def test_the_lab_is_the_files_the_doc_names_and_one_registry_line(new_lab):
    named = doc_files()
    assert REGISTRY_FILE in named and len(named) <= 6
    assert sorted(placed(path) for path in named if path != REGISTRY_FILE) == new_lab == sorted(map(placed, FILES))
    assert len(new_lab) + 1 <= 6  # written, and the registry's line: nothing else was edited


def test_its_command_shows_its_question_then_its_help(new_lab):
    done = invoke(NAME, "--help")
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    assert text.startswith(f"Usage: ctxlab {NAME} [OPTIONS] {QUESTION} ctxlab {NAME} ctxlab {NAME} --value 42")
    assert "    ctxlab childenv --value 42" in done.output and "Needs no GPU." in text
    assert "--value INTEGER RANGE The value the scenario sets in its child's environment. [default: 7; 0<=x<=99]" \
        in text


def test_running_it_judges_its_claim(new_lab, tmp_path):
    out = tmp_path / "run.json"
    done = invoke(NAME, "--value", "42", "--format", "json", "-o", out)
    assert done.exit_code == 0, done.output
    (run,) = ctxlab.load(out)
    assert run.lab == NAME and run.options["value"] == 42
    assert [(c.id, c.verdict, c.evidence) for c in run.claims] == [
        ("childenv.child-sees-env", "holds", "set to 42; the child read 42")]
    assert invoke(NAME, "--value", "100").exit_code == 2  # the option's range, from its field


def test_check_and_claims_find_it_in_the_registry(new_lab, tmp_path, monkeypatch):
    monkeypatch.setattr("ctxlab.cli.parse_devices", lambda text: [0])  # no GPU here: device 0 stands in
    listed = invoke("claims", "--lab", NAME, "--format", "json")
    assert listed.exit_code == 0, listed.output
    assert [c["id"] for c in json.loads(listed.stdout)["claims"]] == ["childenv.child-sees-env"]
    out = tmp_path / "check.json"
    done = invoke("check", "--only", NAME, "--format", "json", "-o", out)
    assert done.exit_code == 0, done.output
    assert [(r.lab, [c.verdict for c in r.claims]) for r in ctxlab.load(out)] == [(NAME, ["holds"])]


def test_its_cases_make_its_promise_fail(new_lab):
    cases = importlib.import_module(f"tests.claim_cases.{NAME}").CASES  # as tests/labs/test_claims_can_fail.py loads
    (claim,) = ctxlab.claims(NAME)
    case = cases[claim.id]
    assert claim.result(list(case.fixture)).verdict == "holds"
    assert case.breaks
    for breaking in case.breaks:
        assert claim.result(breaking(list(case.fixture))).verdict == "fails"


def test_the_command_list_shows_its_registry_line_without_importing_it(new_lab, tmp_path):
    """In a fresh interpreter, the registry's line added before the CLI is imported, as the line in
    ctxlab/labs/__init__.py would be."""
    probe = (f"import json, sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport ctxlab.labs\n"
             f"ctxlab.labs.LABS[{NAME!r}] = ctxlab.labs.LabEntry({NAME!r}, {SUMMARY!r})\n"
             "from click.testing import CliRunner\nimport ctxlab.cli\n"
             "done = CliRunner().invoke(ctxlab.cli.cli, ['--help'])\n"
             f"print(json.dumps([done.exit_code, done.output, {NAME!r} in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                          cwd=ROOT)
    code, text, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0 and f" {NAME} {SUMMARY} " in " ".join(text.split())
    assert not imported
