"""The lab commands are built from the registry (issue 24): one command per lab, one option per field of its options
dataclass with the field's type, default, range or choices and help, then the report's options; a bound is written
once, in the dataclass, and the command line enforces it."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

import click
import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.cli.labs import LabCommand, field_kind
from ctxlab.cli.options import device_option, repeats_option
from ctxlab.cli.report import HandoffProgress
from ctxlab.lab import Lab, LabOptions, bounded, described, flag_of
from ctxlab.labs import LABS, get_lab
from tests.hostile import assert_usage_error, invoke

REPORT_OPTIONS = {"fmt", "output", "steps", "full"}  # output_options: --format, --output, --steps, --full


def shown_options(command: click.Command) -> dict[str, click.Option]:
    """The command's options by parameter name, hidden ones and --help left out."""
    return {p.name: p for p in command.params if isinstance(p, click.Option) and not p.hidden and p.name}


def ranged_fields():
    """(lab, field) for every field with a range, of every registered lab."""
    for name in LABS:
        for f in dataclasses.fields(get_lab(name).options):
            if "range" in f.metadata:
                yield name, f


@pytest.mark.parametrize("name", sorted(LABS))
def test_every_lab_has_a_command_whose_options_are_its_fields(name):
    command = cli.commands[name]
    assert isinstance(command, LabCommand)
    options = get_lab(name).options
    fields = {f.name: f for f in dataclasses.fields(options)}
    params = shown_options(command)
    assert set(params) == set(fields) | REPORT_OPTIONS
    hints = typing.get_type_hints(options)
    for f in fields.values():
        param = params[f.name]
        assert param.opts[0] == flag_of(f) and param.help == f.metadata["help"], f.name  # every field says what it is
        assert param.default == f.default, f.name
        if field_kind(hints[f.name]) is bool:
            assert param.is_flag, f.name
        if "choices" in f.metadata:
            assert list(param.type.choices) == list(f.metadata["choices"]), f.name
        if "range" in f.metadata:
            assert (param.type.min, param.type.max) == f.metadata["range"], f.name
            assert not param.type.min_open and not param.type.max_open


@pytest.mark.parametrize("name", sorted(LABS))
def test_every_lab_has_its_own_help_with_an_example(name):
    lab = get_lab(name)
    assert lab.help  # in the lab's package, beside its question
    text = invoke(name, "--help").output
    assert f"    ctxlab {name}" in text and " ".join(lab.question.split()) in " ".join(text.split())


@pytest.mark.parametrize("args, text", [
    (["refcount", "--repeats", "0"], "--repeats"),
    (["migrate", "--threads", "1025"], "--threads"),
    (["migrate", "-t", "1025"], "-t"),
    (["migrate", "--handoff-timeout", "nan"], "--handoff-timeout"),
    (["migrate", "--timeout", "inf"], "--timeout"),  # the former spelling has the same type
    (["interop", "--scenario-timeout", "nan"], "--scenario-timeout"),
    (["lifecycle", "--isolation", "some"], "--isolation"),
    (["migrate", "--context", "purple"], "--context"),
])
def test_a_bound_from_the_dataclass_is_one_line_with_exit_2(args, text):
    assert_usage_error(invoke(*args), text)


@pytest.mark.parametrize("name, f", list(ranged_fields()), ids=lambda v: getattr(v, "name", v))
def test_every_bound_is_enforced_just_past_each_end(name, f, monkeypatch):
    monkeypatch.setattr("ctxlab.cli.run_lab", lambda *args, **kwargs: None)  # within the bounds: no GPU needed
    low, high = f.metadata["range"]
    step = 1 if isinstance(low, int) and isinstance(high, int) else 0.01
    flag = flag_of(f)
    for value in (low - step, high + step):
        assert_usage_error(invoke(name, flag, str(value)), flag)
    for value in (low, high):
        if name == "migrate" and f.name in ("threads", "rounds"):
            continue  # threads x rounds has its own limit (test_cli)
        assert invoke(name, flag, str(value)).exit_code == 0, (name, flag, value)


@pytest.fixture
def ran(monkeypatch):
    seen: dict = {}
    monkeypatch.setattr("ctxlab.cli.run_lab", lambda name, fmt, output, **kwargs: seen.update(
        name=name, fmt=fmt, output=output, **kwargs))
    return seen


def test_the_values_given_reach_the_lab_with_the_progress_display(ran):
    assert invoke("migrate", "-t", "8", "-r", "2", "--context", "all", "--jobs", "2", "--format", "json").exit_code == 0
    assert ran["name"] == "migrate" and ran["fmt"] == "json" and ran["output"] is None
    assert (ran["threads"], ran["rounds"], ran["context"], ran["jobs"], ran["timeout"]) == (8, 2, "all", 2, 30.0)
    assert isinstance(ran["on_progress"], HandoffProgress)  # shown for the scenarios that report progress
    ran.clear()
    assert invoke("refcount").exit_code == 0
    given = {k: v for k, v in ran.items() if k not in ("name", "fmt", "output", "on_progress", "steps", "full")}
    assert given == LabOptions().to_dict()  # every field, at its default


@dataclass(frozen=True)
class DemoOptions(LabOptions):
    """A lab of the tests' own, with options of every kind."""

    width: int = field(default=2, metadata=bounded(1, 9, "How wide.", flags=("--width", "-w"), former="--size"))
    ratio: float = field(default=0.5, metadata=bounded(0, 1, "How much."))
    mode: str = field(default="a", metadata=described("Which way.", choices=("a", "b")))
    loud: bool = field(default=False, metadata=described("Say more."))


DEMO = Lab("demo", "A question?", DemoOptions, (), lambda options: [], needs_gpu=False)


def test_a_new_lab_gets_its_command_from_the_registry_alone(monkeypatch, ran):
    monkeypatch.setitem(LABS, "demo", "tests.cli.test_cli_labs:DEMO")
    command = LabCommand("demo", lambda *args, **kwargs: ran.update(args=args, **kwargs))
    group = click.Group("ctxlab", commands={"demo": command})
    runner = CliRunner()
    text = runner.invoke(group, ["demo", "--help"]).output
    assert "ctxlab demo" in text and "-w, --width INTEGER RANGE" in text and "[default: 2; 1<=x<=9]" in text
    assert "--size" not in text and "[a|b]" in text and "Say more." in text
    done = runner.invoke(group, ["demo", "--size", "3", "--ratio", "1", "--mode", "b", "--loud"])
    assert done.exit_code == 0, done.output
    assert ran["args"] == ("demo", "table", None)
    assert (ran["width"], ran["ratio"], ran["mode"], ran["loud"]) == (3, 1.0, "b", True)
    assert "--size is now --width" in done.output
    for bad in (["--width", "10"], ["--ratio", "nan"], ["--mode", "c"], ["--size", "0"]):
        assert runner.invoke(group, ["demo", *bad]).exit_code == 2, bad


def test_the_shared_options_bounds_are_the_dataclass_bounds():
    """check's --repeats and the --device option of other commands keep their own decorators: same bounds."""
    fields = {f.name: f for f in dataclasses.fields(LabOptions)}
    for decorate, name in ((repeats_option, "repeats"), (device_option, "device")):
        (param,) = click.command()(decorate(lambda **kwargs: None)).params
        assert (param.type.min, param.type.max) == fields[name].metadata["range"], name


def test_listing_the_commands_builds_no_lab_command():
    fresh = [LabCommand(name, lambda *args, **kwargs: None) for name in LABS]
    group = click.Group("ctxlab", commands={c.name: c for c in fresh})
    assert "Commands:" in CliRunner().invoke(group, ["--help"]).output
    assert all(c._built is None for c in fresh)
