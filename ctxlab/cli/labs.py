"""The lab commands, one per lab of the registry (``ctxlab.labs.LABS``): ``ctxlab migrate``, ``ctxlab refcount``...

Each command's options are its lab's options dataclass (``Lab.options``): one option per field, its type, default,
range or choices and its help taken from the field (``ctxlab.lab.bounded``, ``described``), then the report's
options; its help is the lab's question and ``Lab.help``. The command list (``ctxlab --help``) needs only each
lab's line in the registry (``LabEntry.summary``): the lab loads the first time the command's own help or options
are needed (for its ``--help``, or to parse them).
Progress of a long relay is shown for every lab whose scenarios report it (``Scenario.reports_progress``).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ctxlab.cli.options import former_name, output_options
from ctxlab.cli.report import HandoffProgress
from ctxlab.cli.types import FiniteFloat, OneLineCommand, domain_errors
from ctxlab.labs import LABS, summary_of

if TYPE_CHECKING:
    from ctxlab.lab import Lab, LabOptions

RunLab = Callable[..., None]  # run_lab(name, fmt, output, on_progress=, steps=, full=, **options)


def help_of(lab: Lab) -> str:
    """The help of ``lab``'s command: its question, then its ``help`` (or, for a lab without one, the examples
    every lab command takes)."""
    text = lab.help or f"""\b
      ctxlab {lab.name}
      ctxlab {lab.name} --format json -o {lab.name}.json
    """
    return f"{lab.question}\n\n{inspect.cleandoc(text)}"


def ordered_fields(options: type[LabOptions]) -> list[dataclasses.Field]:
    """The options' fields in the order their command lists them: the lab's own, then those every lab takes."""
    from ctxlab.lab import LabOptions

    common = {f.name for f in dataclasses.fields(LabOptions)}
    fields = dataclasses.fields(options)
    return [f for f in fields if f.name not in common] + [f for f in fields if f.name in common]


def option_type(f: dataclasses.Field, kind: Any) -> click.ParamType | None:
    """The Click type of field ``f`` (annotated ``kind``): its choices, its range (a float's finite), or None
    for a flag."""
    if "choices" in f.metadata:
        return click.Choice(list(f.metadata["choices"]))
    low, high = f.metadata.get("range", (None, None))
    if kind is bool:
        return None
    if kind is int:
        return click.IntRange(low, high)
    if kind is float:
        return FiniteFloat(low, high)
    return click.STRING


def field_kind(hint: Any) -> Any:
    """The type a field holds, ``int`` for ``int | None``."""
    kinds = [k for k in typing.get_args(hint) if k is not type(None)]
    return kinds[0] if len(kinds) == 1 else hint


def option_decorators(f: dataclasses.Field, hint: Any) -> list[Callable[[Any], Any]]:
    """The decorators that give a command field ``f``'s option (and its hidden former spelling, if any)."""
    from ctxlab.lab import flag_of

    kind = field_kind(hint)
    type_ = option_type(f, kind)
    flags = f.metadata.get("flags", (flag_of(f),))
    shown = dict(help=f.metadata.get("help"), metavar=f.metadata.get("metavar"))
    if type_ is None:
        decorators = [click.option(*flags, f.name, is_flag=True, default=bool(f.default), **shown)]
    else:
        decorators = [click.option(*flags, f.name, type=type_, default=f.default,
                                   show_default=f.default is not None, **shown)]
    if "former" in f.metadata:
        decorators.append(former_name(f.metadata["former"], flags[0], f.name, type_))
    return decorators


def build_command(name: str, run: RunLab) -> click.Command:
    """Lab ``name``'s command, its options from its options dataclass, running through ``run``."""
    from ctxlab.labs import get_lab

    lab = get_lab(name)
    options = lab.options

    def body(fmt: str, output: str | None, steps: bool, full: bool, **values: Any) -> None:
        run(name, fmt, output, on_progress=HandoffProgress(), steps=steps, full=full, **values)

    fn: Any = output_options(domain_errors(body))
    hints = typing.get_type_hints(options)
    for f in reversed(ordered_fields(options)):
        for decorate in option_decorators(f, hints[f.name]):
            fn = decorate(fn)
    return click.command(name, cls=OneLineCommand, help=help_of(lab))(fn)


class LabCommand(OneLineCommand):
    """A lab's command: its line in the command list from the registry (``summary_of``), its help, options and
    callback built from the lab the first time they are needed, so that listing the commands loads no lab."""

    def __init__(self, name: str, run: RunLab):
        self._run = run
        self._built: click.Command | None = None
        super().__init__(name, short_help=summary_of(name))

    def built(self) -> click.Command:
        """The command as built from the lab's options (built once)."""
        if self._built is None:
            assert self.name is not None
            self._built = build_command(self.name, self._run)
        return self._built

    @property  # Click's is a plain attribute, set in its __init__
    def help(self) -> str | None:
        """The lab's question and its help (``help_of``)."""
        return self.built().help

    @help.setter
    def help(self, value: str | None) -> None:
        pass  # Click's __init__ sets None: the help is the lab's

    @property
    def params(self) -> list[click.Parameter]:
        """The lab's options, then the report's."""
        return self.built().params

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        pass  # Click's __init__ sets []: the options are the lab's

    @property
    def callback(self) -> Callable[..., Any] | None:
        """Run the lab with the options given."""
        return self.built().callback

    @callback.setter
    def callback(self, value: Callable[..., Any] | None) -> None:
        pass  # Click's __init__ sets None: the body is build_command's


def lab_commands(run: RunLab) -> list[click.Command]:
    """A command for every lab in the registry, each running through ``run``."""
    return [LabCommand(name, run) for name in LABS]
