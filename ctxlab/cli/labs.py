"""The lab commands, one per lab of the registry (``ctxlab.labs.LABS``): ``ctxlab migrate``, ``ctxlab refcount``...

Each command's options are its lab's options dataclass (``Lab.options``): one option per field, its type, default,
range or choices and its help taken from the field (``ctxlab.lab.bounded``, ``described``), then the report's
options. The command list (``ctxlab --help``) needs only each command's help text, below: the lab and its
options load the first time the command's own options are needed (to parse them, or for its ``--help``).
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
from ctxlab.labs import LABS

if TYPE_CHECKING:
    from ctxlab.lab import LabOptions

# Each lab command's help: what it shows, examples, then what it runs. The command list shows the first sentence.
LAB_HELP = {
    "migrate": """Hand a context between host threads; check that state moves with it.

    \b
      ctxlab migrate
      ctxlab migrate --threads 8 --rounds 100 --context all
      ctxlab migrate --format json -o migrate.json

    Thread 1 allocates with CuPy, writes a __device__ global and makes a
    stream; every thread in turn pushes the context, verifies pointers,
    global, stream and values, updates them, pops and hands over. Also: one
    context current on two threads, a thread without the context, CuPy's
    caches under a second context (repeated), and a cross-context dereference,
    each in its own process. With --context green (or all): the same relay of
    a green context, and that context current on two threads at once
    (repeated), the SMs its kernels ran on, which context owns its memory, and
    CuPy under it.
    """,
    "refcount": """Show what keeps a context alive and what release and reset destroy.

    \b
      ctxlab refcount
      ctxlab refcount --repeats 10 --steps

    Each scenario runs in its own process: the runtime's own references to
    the primary context, releasing without a retain, cudaDeviceReset under
    CuPy, cuDevicePrimaryCtxReset, cuCtxAttach/cuCtxDetach and cuCtxDestroy
    on a created context, and whether cudaThreadExit still exists. Scenarios
    that use data after a release, reset or destroy run --repeats times.
    """,
    "interop": """Show whether CuPy, PyTorch, JAX, Numba and cuda.core share one context, and what survives fork.

    \b
      ctxlab interop
      ctxlab interop --format markdown -o interop.md

    Each library alone in a fresh process (the context it leaves current, its
    allocation's context, a fresh thread's first use, the primary-context
    references it holds), all of them together, DLPack and
    __cuda_array_interface__ exchanges between pairs (same pointer, owning
    context, stream order, a worker thread), each library under a cuCtxCreate
    or green context, each teardown (device reset, primary release or reset,
    cuCtxDestroy) against every library's data (repeated), a child made by fork
    or by each multiprocessing start method (repeated), CUDA IPC handles in a
    spawned child, and which context owns VMM and pool memory. A missing
    library is skipped.
    """,
    "peer": """Show whether peer access between two GPUs belongs to a context and follows it to another thread.

    \b
      ctxlab peer --device 0
      ctxlab peer --trace --steps

    Runs on --device and the next GPU. A context enables access toward a
    context on the other GPU (twice), moves to another thread, and there copies
    and reads the other GPU's memory; kernels of contexts without access
    (repeated), a primary context reset of either GPU, and each thread's
    current device. Needs 2 GPUs: on one, every claim is skipped with why.
    """,
    "lifecycle": """Show when and by which calls the runtime creates its context, and how to get its handle.

    \b
      ctxlab lifecycle
      ctxlab lifecycle --trace --steps

    Each sequence runs in a fresh process: import and first calls (in a new
    interpreter that has imported nothing), cudaFree(0), cudaInitDevice, a
    cuCtxCreate context made first, the handle through cuCtxGetCurrent, a new
    host thread, and device flags before and after activation. --trace shows
    the driver calls beneath.
    """,
    "modules": """Show how and when modules are loaded into a context.

    \b
      ctxlab modules
      ctxlab modules --format junit -o modules.xml

    Each scenario runs in a fresh process: the same module under
    CUDA_MODULE_LOADING=EAGER, LAZY and unset (witnessed by CUPTI's
    MODULE_LOADED and by device memory), one module in two contexts, a
    context-independent library (cuLibraryLoadData) in two contexts, nvcc's
    registration stub and a library built with it (needs nvcc), and CuPy's
    kernel cache under another context (repeated).
    """,
}

RunLab = Callable[..., None]  # run_lab(name, fmt, output, on_progress=, steps=, full=, **options)


def help_of(name: str) -> str:
    """The help of lab ``name``'s command: its entry in LAB_HELP, or for a lab without one a plain line and the
    examples every lab command takes (tests/test_cli_labs.py asks every lab for an entry)."""
    text = LAB_HELP.get(name) or f"""Run the {name} lab and give a verdict per claim.

    \b
      ctxlab {name}
      ctxlab {name} --format json -o {name}.json
    """
    return inspect.cleandoc(text)


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

    options = get_lab(name).options

    def body(fmt: str, output: str | None, steps: bool, full: bool, **values: Any) -> None:
        run(name, fmt, output, on_progress=HandoffProgress(), steps=steps, full=full, **values)

    fn: Any = output_options(domain_errors(body))
    hints = typing.get_type_hints(options)
    for f in reversed(ordered_fields(options)):
        for decorate in option_decorators(f, hints[f.name]):
            fn = decorate(fn)
    return click.command(name, cls=OneLineCommand, help=help_of(name))(fn)


class LabCommand(OneLineCommand):
    """A lab's command: its help given, its options and callback built from the lab the first time they are
    needed, so that listing the commands loads no lab."""

    def __init__(self, name: str, run: RunLab):
        self._run = run
        self._built: click.Command | None = None
        super().__init__(name, help=help_of(name))

    def built(self) -> click.Command:
        """The command as built from the lab's options (built once)."""
        if self._built is None:
            assert self.name is not None
            self._built = build_command(self.name, self._run)
        return self._built

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
