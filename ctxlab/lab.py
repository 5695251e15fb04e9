"""The lab model: what every lab declares, in one shape.

A lab is a name, a question, a frozen options dataclass, its claims, the
scenarios it runs for given options, its step tables and its command's help
(``ctxlab <lab> --help``: the question, then ``help``). A lab writes its
question once, in ``question``: its command's help shows it from there, and the
registry (``ctxlab.labs``) holds only the command list's line. ``ctxlab.run``,
``ctxlab check`` and the CLI all run a lab through ``harness.pool`` (``run_plans``, ``run_lab``).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ctxlab.claim import Claim
from ctxlab.defaults import DEFAULT_REPEATS
from ctxlab.errors import OptionError
from ctxlab.levels import FULL


class Isolation(StrEnum):
    """Where a scenario runs."""

    FORKSERVER = "forkserver"  # a fresh child of the forkserver that imported CuPy and cuda.bindings (no CUDA call)
    FRESH = "fresh"  # a new interpreter that has imported nothing: for watching imports themselves
    GPU_ALONE = "gpu-alone"  # a forkserver child that holds the GPU alone: its figures read device-wide state
    # One forkserver child shared, one scenario after another, with the lab's other SHARED scenarios of the same
    # environment (harness.batch): for a scenario that does not need a fresh process. It may start libraries
    # and their primary context, never release, reset or re-flag it, and must leave no thread running and no
    # context but a primary one current; the harness checks that between two and re-runs the rest in fresh
    # children if not.
    SHARED = "shared"


class _Target:
    """``Scenario.target``: set from the function itself (or a ``"module:function"`` string), read as that string,
    which is what the harness hands to the child. A descriptor rather than ``__post_init__``, so that the type
    checker knows both faces: ``Scenario(name, function)`` and ``scenario.target: str``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, scenario: Any, owner: type | None = None) -> str:
        if scenario is None:
            raise AttributeError("target has no default")  # how a dataclass learns that the field has none
        return scenario.__dict__[self.slot]

    def __set__(self, scenario: Any, target: str | Callable[..., Any]) -> None:
        if callable(target):  # the child imports it by name: it must be a module's top-level function
            module, name = target.__module__, target.__qualname__
            if "." in name or not module or module == "__main__":
                raise ValueError(f"{module}.{name} is not a module's top-level function: a child cannot import it")
            target = f"{module}:{name}"
        scenario.__dict__[self.slot] = target


@dataclass(frozen=True)
class Scenario:
    """One experiment of a lab: ``target`` (a function, kept as ``module:function``) called with ``args`` in a child
    process.

    ``undefined`` marks undefined-behaviour territory (use after release, reset or
    destroy; cached kernels across contexts): it runs ``repeats`` times, each in a
    fresh process, and its claims judge over the distribution of outcomes.
    """

    name: str
    target: _Target = _Target()  # given the function itself (or "module:function"); reads "module:function"
    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    isolation: Isolation = Isolation.FORKSERVER
    undefined: bool = False
    timeout: float = 120.0
    env: Mapping[str, str | None] = field(default_factory=dict)  # None unsets the variable in the child
    reports_progress: bool = False  # calls harness.isolate.report_progress (long relays)


def bounded(low: float, high: float, help: str | None = None, **cli: Any) -> Any:
    """Field metadata: the option's inclusive range, checked when the options are made; with ``help``, also
    what its command-line option says and how it is spelt (``described``)."""
    return {"range": (low, high), **(described(help, **cli) if help is not None else {})}


def described(help: str, *, flags: tuple[str, ...] = (), former: str | None = None, metavar: str | None = None,
              **metadata: Any) -> Any:
    """Field metadata for the field's option on the lab's command (``ctxlab <lab>``, built from these fields):
    its ``help`` text and, where they are not the field's name with dashes, its ``flags`` (the long one first,
    then a short one), a hidden ``former`` spelling that still works, its ``metavar``; ``metadata`` holds the
    field's other entries (``choices``). The option's type, default and range are the field's."""
    spelling = {"flags": flags, "former": former, "metavar": metavar}
    return {**metadata, "help": help, **{key: value for key, value in spelling.items() if value}}


def flag_of(f: dataclasses.Field) -> str:
    """The command-line option that sets field ``f``: its declared long flag, or its name with dashes."""
    return f.metadata.get("flags", ("--" + f.name.replace("_", "-"),))[0]


@dataclass(frozen=True)
class LabOptions:
    """Options every lab takes. Subclasses add their own fields, with ``bounded`` ranges where they have one and the
    help of each field's option on the lab's command (``bounded``'s or ``described``'s ``help``)."""

    device: int = field(default=0, metadata=bounded(0, 1023, "Index of the GPU to run on (as the driver numbers "
                                                            "them).", flags=("--device", "-d"), metavar="N"))
    trace: bool = field(default=False, metadata=described("Attach to each step the driver calls and resource "
                                                           "events it caused (CUPTI)."))
    repeats: int = field(default=DEFAULT_REPEATS, metadata=bounded(
        1, 100, "Runs of each scenario in undefined-behaviour territory (use after release, reset or destroy), "
                "each in a fresh process; its claims judge the distribution of outcomes."))
    scenario_timeout: float | None = field(default=None, metadata=bounded(  # caps each scenario's own
        0.1, 86400, "Seconds any one scenario may run before it is killed and reported as an error (as check's "
                    "--timeout; without it, each scenario's own limit)."))
    jobs: int | None = field(default=None, metadata=bounded(  # scenarios side by side (default: cores)
        1, 256, "Child processes at once (default: the CPU cores, at most 8); scenarios that need the GPU alone "
                "still run one at a time."))
    isolation: str = field(default="batched", metadata=described(  # each: SHARED ones too
        "batched: scenarios that do not need a fresh process share one child, checked clean between two, the "
        "rest re-run in fresh children if not; each: one child per scenario (as check's --isolation).",
        choices=("batched", "each")))
    level: int = field(default=FULL, metadata=bounded(  # ctxlab.levels
        1, FULL, "How much to judge, as check's --level: 1 node health (the promises a context handoff rests on), 2 "
                 "every documented claim, each scenario once; 3 every claim, undefined-behaviour scenarios "
                 "repeated (the default). Claims above the level read unjudged.", metavar="1|2|3"))

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            validate(f, getattr(self, f.name))
        if isinstance(self.level, bool) or not isinstance(self.level, int):  # validate let 2.5 through the range
            raise OptionError(f"level: {self.level!r} is not one of 1, 2, 3", cli=f"--level: {self.level!r} is not "
                              "one of 1, 2, 3")

    @property
    def runs_per_scenario(self) -> int:
        """How often an undefined-behaviour scenario runs: ``repeats`` at the full level, once below it."""
        return self.repeats if self.level >= FULL else 1

    def to_dict(self) -> dict:
        """The options as recorded in a result."""
        return dataclasses.asdict(self)


def validate(f: dataclasses.Field, value: Any) -> None:
    """Reject NaN, infinities, wrong types and values outside a field's range, naming the parameter (and,
    for the CLI, the option)."""
    flag = flag_of(f)
    if value is None:
        return
    if "choices" in f.metadata:
        if value in f.metadata["choices"]:
            return
        problem = f"{value!r} is not one of {', '.join(f.metadata['choices'])}"
    elif isinstance(value, float) and not math.isfinite(value):
        problem = f"{value} is not a finite number"
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        if "range" not in f.metadata:
            return
        problem = f"{value!r} is not a number"
    else:
        low, high = f.metadata.get("range", (-math.inf, math.inf))
        if low <= value <= high:
            return
        problem = f"{value} is not in the range {low:g} to {high:g}"
    raise OptionError(f"{f.name}: {problem}", cli=f"{flag}: {problem}")


def scenarios_in(module: str) -> Callable[[Any], list[Scenario]]:
    """A lab's scenario builder, ``module``'s ``scenarios(options)``, imported when first called: a lab package
    that names its scenarios this way loads none of their modules for ``--help`` or ``ctxlab claims``."""
    def build(options: Any) -> list[Scenario]:
        return importlib.import_module(module).scenarios(options)
    build.__qualname__ = f"scenarios_in({module!r})"
    return build


def exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A lab package's module ``__getattr__``: each name in ``names`` from its module (``{name: module}``, the
    module below ``package``), imported on first use, so that importing the package imports only its claims
    and options."""
    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        if not name.startswith("__"):  # a module of the package, as after ``import package.module``
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(name)
    return __getattr__


@dataclass(frozen=True)
class Lab:
    """A lab's declaration; see the module docstring."""

    name: str
    question: str
    options: type[LabOptions]
    claims: tuple[Claim, ...]
    scenarios: Callable[[Any], list[Scenario]]  # options -> the scenarios to run
    views: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # step tables: kind -> columns
    needs_gpu: bool = True  # False only for the test suite's stand-in labs
    # The GPUs the lab needs (peer: 2): a skip for want of GPUs must name this count, and is checked against the
    # count the run's environment records (ctxlab.records.skips); a one-GPU lab cannot skip for want of two.
    gpus: int = 1
    # What a shared child checks between two SHARED scenarios (harness.batch); the test suite's stand-in labs,
    # which have no GPU, name their own.
    clean_check: str = "ctxlab.harness.batch:cuda_problems"
    # The options under which ``check`` decides every claim this lab has on a GPU that can (migrate's green
    # contexts, lifecycle's traced calls); ``check`` drops one whose instrument is missing (``trace``: CUPTI),
    # and the claims that need it read skipped with the reason.
    check_options: Mapping[str, Any] = field(default_factory=dict)
    # What ``ctxlab <lab> --help`` shows below the question: examples (each ``ctxlab <lab> ...`` under Click's
    # ``\b``), then what the lab runs. Read only by the lab's own command.
    help: str = ""

    def __post_init__(self) -> None:
        ids = [c.id for c in self.claims]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: claim ids repeat")

    def make_options(self, **values: Any) -> LabOptions:
        """Validated options; unknown names are an OptionError naming them."""
        known = {f.name for f in dataclasses.fields(self.options)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise OptionError(f"{self.name} takes no option {', '.join(unknown)}; it takes {', '.join(sorted(known))}")
        return self.options(**values)
