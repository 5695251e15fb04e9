"""Usage errors are one line on every command (issue 26): ``Error: ...`` with the hint folded in, exit 2.

The cases are drawn from the commands themselves: every option whose value Click validates (a range, a
choice, a size, a path that may not be empty, a list that must name something) gets values it refuses,
so an option added later is covered without this file changing."""

from __future__ import annotations

import click
import pytest

from ctxlab.cli import cli
from ctxlab.cli.types import ByteSize, NameList, OutputPath, ResultPath
from tests.conftest import RESULTS
from tests.hostile import invoke

M = str(RESULTS / "migrate.json")
NEEDS = {"show": [M], "merge": [M]}  # a valid argument, so that only the option is wrong


def commands(group: click.Group = cli, path: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def bad_values(param: click.Parameter) -> list[str]:
    kind = param.type
    if isinstance(kind, click.Choice):
        return ["no-such-choice"]
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        values = ["not-a-number"]
        if kind.min is not None:
            values.append(str(kind.min - 1))
        if kind.max is not None:
            values.append(str(kind.max + 1))
        if isinstance(kind, click.FloatRange):
            values.append("nan")
        return values
    if isinstance(kind, ByteSize):
        return ["lots", "0", "99999999999999999999999G"]
    if isinstance(kind, (OutputPath, ResultPath)):
        return [""]
    if isinstance(kind, NameList):
        return [",", ""]
    if kind in (click.INT, click.FLOAT):
        return ["not-a-number"]
    return []


CASES = [pytest.param(path, param.opts[0], value, id=f"{' '.join(path)} {param.opts[0]} {value!r}")
         for path, command in commands() for param in command.params
         if isinstance(param, click.Option) and not param.is_flag for value in bad_values(param)]


def assert_one_line_usage_error(result, command: tuple[str, ...]) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ") and "Traceback" not in result.output and "Usage:" not in result.output
    assert lines[0].endswith(f"(try 'ctxlab {' '.join(command)} --help')"), lines[0]


def test_the_cases_cover_every_command_that_takes_a_validated_option():
    covered = {case.values[0] for case in CASES}
    assert {("show",), ("check",), ("migrate",), ("claims",), ("doctor",), ("trace",), ("audit",),
            ("report", "merge")} <= covered
    assert len(CASES) > 60


@pytest.mark.parametrize("command, option, value", CASES)
def test_every_validated_option_refuses_in_one_line(command, option, value):
    result = invoke(*command, *NEEDS.get(command[-1], []), option, value)
    assert_one_line_usage_error(result, command)
    assert option in result.output or "empty" in result.output, result.output


@pytest.mark.parametrize("command", [path for path, cmd in commands()
                                     if not cmd.context_settings.get("ignore_unknown_options")])
def test_an_unknown_option_is_one_line(command):
    result = invoke(*command, "--no-such-option")
    assert_one_line_usage_error(result, command)
    assert "--no-such-option" in result.output


@pytest.mark.parametrize("command", [path for path, cmd in commands()
                                     if any(isinstance(p, click.Option) and not p.is_flag and p.opts[0] != "-c"
                                            for p in cmd.params)])
def test_an_option_without_its_value_is_one_line(command):
    option = next(p for p in dict(commands())[command].params if isinstance(p, click.Option) and not p.is_flag)
    result = invoke(*command, *NEEDS.get(command[-1], []), option.opts[0])
    assert_one_line_usage_error(result, command)


@pytest.mark.parametrize("args", [["show"], ["report", "merge"], ["nosuchcommand"], ["report", "nosuch"],
                                  ["check", "--fail-on-drift"], ["trace"], ["audit", "-c", "1", "-m", "json"]])
def test_missing_arguments_and_unknown_commands_are_one_line(args):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and result.output.startswith("Error: "), result.output


def test_no_command_names_the_commands_and_help_still_shows_the_help():
    result = invoke()  # a group alone is one line naming its commands (issue 38): tests/report/test_terminal_width.py
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1 and "show" in result.output
    result = invoke("--help")
    assert "Usage:" in result.output and "Commands:" in result.output


def test_what_the_user_typed_is_written_out_not_sent_to_the_terminal():
    result = invoke("show", M, "--format", "\x1b]0;pwned\x07")
    assert_one_line_usage_error(result, ("show",))
    assert "\x1b" not in result.output and "\\x1b" in result.output
