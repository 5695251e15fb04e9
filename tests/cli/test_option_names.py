"""One meaning per option name across the commands (issue 26): --timeout is the wall-clock limit of what a
command runs, killed and reported when it is met (check's scenarios, trace's and audit's program), and
migrate's per-handoff limit is --handoff-timeout; --only is check's lab names and trace's table filter is
--show. The former spellings still work, hidden, with a note; both spellings at once is a usage error."""

from __future__ import annotations

import click
import pytest

from tests.cli.test_usage_errors import commands
from tests.hostile import assert_usage_error, invoke

COMMANDS = dict(commands())


def shown(name: str) -> list[tuple[str, ...]]:
    """The commands whose help lists the option ``name``."""
    return sorted(path for path, cmd in COMMANDS.items()
                  for p in cmd.params if isinstance(p, click.Option) and not p.hidden and name in p.opts)


def test_timeout_and_only_have_one_meaning():
    assert shown("--timeout") == [("audit",), ("check",), ("trace",)] and shown("--only") == [("check",)]
    for command in ("audit", "trace"):  # the same meaning: a limit on what runs, which is stopped and reported
        text = " ".join(invoke(command, "--help").output.split())
        assert "--timeout SECONDS Stop the program after this long" in text
    assert shown("--handoff-timeout") == [("migrate",)] and shown("--show") == [("trace",)]
    assert "--timeout" not in " ".join(invoke("migrate", "--help").output.split()).replace("check's --timeout", "")
    assert "--only" not in invoke("trace", "--help").output


@pytest.fixture
def lab_options(monkeypatch):
    seen: dict = {}
    monkeypatch.setattr("ctxlab.cli.run_lab", lambda name, fmt, output, **options: seen.update(options))
    return seen


def test_migrate_handoff_timeout_reaches_the_lab(lab_options):
    result = invoke("migrate", "--handoff-timeout", "7.5")
    assert result.exit_code == 0 and lab_options["timeout"] == 7.5 and "note:" not in result.output


def test_migrate_former_timeout_still_works_with_a_note(lab_options):
    result = invoke("migrate", "--timeout", "4")
    assert result.exit_code == 0 and lab_options["timeout"] == 4.0
    assert "ctxlab migrate's --timeout is now --handoff-timeout" in result.output


def test_migrate_default_handoff_timeout(lab_options):
    assert invoke("migrate").exit_code == 0 and lab_options["timeout"] == 30.0


@pytest.fixture
def traced(monkeypatch):
    seen: dict = {}

    def run_traced(**kwargs):
        seen.update(kwargs)
        return 0

    monkeypatch.setattr("ctxlab.cli.tracing.run_traced", run_traced)
    return seen


@pytest.mark.parametrize("args, only", [([], "context"), (["--show", "all"], "all"), (["--only", "all"], "all"),
                                        (["--only", "context"], "context")])
def test_trace_show_and_its_former_name(traced, args, only):
    result = invoke("trace", *args, "-c", "pass")
    assert result.exit_code == 0 and traced["only"] == only
    assert ("--only is now --show" in result.output) == ("--only" in args)


@pytest.mark.parametrize("command, args, text", [
    (["migrate"], ["--timeout", "5", "--handoff-timeout", "3"], "give --handoff-timeout only"),
    (["migrate"], ["--timeout", "0"], "--timeout"), (["migrate"], ["--timeout", "nan"], "--timeout"),
    (["migrate"], ["--handoff-timeout", "0"], "--handoff-timeout"),
    (["trace"], ["--only", "all", "--show", "all", "-c", "pass"], "give --show only"),
    (["trace"], ["--only", "some", "-c", "pass"], "--only"), (["trace"], ["--show", "some", "-c", "pass"], "--show"),
])
def test_bad_or_doubled_spellings_are_one_line(traced, lab_options, command, args, text):
    assert_usage_error(invoke(*command, *args), text)
