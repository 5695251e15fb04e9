"""Help that agrees with itself (issue 26): an example in every command's help, whole descriptions in the
command list, defaults shown, one meaning per shared option name."""

from __future__ import annotations

import click
import pytest

from ctxlab.cli import cli
from ctxlab.labs import LABS, get_lab
from tests.cli.test_usage_errors import commands
from tests.hostile import invoke

COMMANDS = dict(commands())


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_shows_an_example(path):
    text = invoke(*path, "--help").output
    assert any(line.startswith(f"    ctxlab {' '.join(path)}") for line in text.splitlines()), text


def test_the_command_list_keeps_each_whole_first_sentence():
    text = " ".join(invoke("--help").output.split())
    for name, command in cli.commands.items():
        first = command.short_help or command.help.split("\n\n")[0]
        assert " ".join(first.split()) in text, name
    assert "..." not in text.split("Commands:")[1]


@pytest.mark.parametrize("name", sorted(LABS))
def test_a_lab_is_listed_with_its_registry_line_and_its_help_starts_with_its_question(name):
    """The lab's line in the command list is its registry entry's; its own help opens with its question, written
    once, in its package (Lab.question): no other phrasing of it in the code."""
    listed = " ".join(invoke("--help").output.split())
    assert f" {name} {LABS[name].summary} " in listed
    usage, _, text = invoke(name, "--help").output.partition("\n\n")
    assert usage.startswith(f"Usage: ctxlab {name} ")
    assert " ".join(text.split()).startswith(" ".join(get_lab(name).question.split()))


@pytest.mark.parametrize("path, option", [(("check",), "--format"), (("report", "merge"), "--format")])
def test_format_defaults_are_shown(path, option):
    param = next(p for p in COMMANDS[path].params if option in p.opts)
    assert param.show_default, (path, option)


def test_one_meaning_per_shared_option():
    json_options = [(path, p) for path, cmd in COMMANDS.items() for p in cmd.params if "--json" in p.opts]
    assert json_options and all(not p.is_flag for _, p in json_options)  # --json always takes a PATH
    devices = [p for p in COMMANDS[("check",)].params if "--devices" in p.opts]
    assert devices and "-d" in devices[0].opts
    device = [p for path, cmd in COMMANDS.items() for p in cmd.params if "--device" in p.opts]
    assert all(isinstance(p.type, click.IntRange) and p.type.max == 1023 for p in device)


def test_the_readme_states_the_python_version_and_what_the_test_command_skips():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    wanted = tomllib.loads((root / "pyproject.toml").read_text())["project"]["requires-python"]
    assert wanted == ">=3.11" and "Python 3.11 or newer" in readme
    for skipped in ("tests/report/test_html_browser.py", "tests/tracing/test_timeline_browser.py",
                    "tests/cli/test_tmux.py", "tests/cli/test_errors.py"):
        assert skipped in readme and (root / skipped).exists()
    assert "every CPU test runs" not in readme
