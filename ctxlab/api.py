"""The Python API: what every command does, with typed objects back.

    >>> import ctxlab
    >>> result = ctxlab.run("migrate", device=0, threads=8)   # a LabResult
    >>> [c.verdict for c in result.claims]
    >>> runs = ctxlab.check(["refcount"], devices=[0])          # one LabResult per lab and GPU
    >>> ctxlab.load("labs/results/check.json")                 # results recorded anywhere
    >>> ctxlab.claims()                                        # the catalogue of claims
    >>> status, events, stats = ctxlab.api.trace(argv=["prog.py"])  # a program run in this process, traced
    >>> report = ctxlab.api.audit(argv=["prog.py"])                 # its hazards (an AuditResult)

The CLI is a thin layer over these functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ctxlab.claim import Claim
from ctxlab.defaults import DEFAULT_MAX_BYTES
from ctxlab.errors import OptionError
from ctxlab.lab import Lab, LabOptions
from ctxlab.records.model import LabResult


def labs(registry: dict[str, str] | None = None) -> list[Lab]:
    """Every lab, in the order ``check`` runs them."""
    from ctxlab.labs import LABS, get_lab

    return [get_lab(name, registry) for name in (registry or LABS)]


def run(name: str, progress: Callable[[str], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None, **options: Any) -> LabResult:
    """Run one lab on this machine's GPU and return its result.

    ``options`` are the lab's (``device``, ``trace``, ``repeats`` and e.g. migrate's
    ``threads``); bad values raise ``OptionError``, a missing GPU ``NoGpu``, a device
    that does not exist ``BadDevice``. ``progress`` receives one line per scenario;
    ``on_progress(done, total)`` the handoffs of a long relay.
    """
    from ctxlab.cuda.environment import require_device
    from ctxlab.harness.pool import run_lab
    from ctxlab.labs import get_lab

    lab = get_lab(name)
    chosen = lab.make_options(**options)
    if lab.needs_gpu:  # as check has it: a lab without GPU scenarios runs where there is none
        require_device(chosen.device)
    if chosen.trace:
        from ctxlab.tracing.tracer import require_cupti

        require_cupti()
    return run_lab(lab, chosen, progress, on_progress)


def check(names: Sequence[str] | None = None, devices: Sequence[int] = (0,), *, timeout: float | None = None,
          jobs: int | None = None, repeats: int | None = None, progress: Callable[[LabResult], None] | None = None,
          registry: dict[str, str] | None = None, baseline: Sequence[LabResult] | None = None,
          schedule: list | None = None, isolation: str = "batched", level: int = 3) -> list[LabResult]:
    """Every lab (or ``names``) on every GPU in ``devices``, isolated: one LabResult per lab and GPU, each lab
    with the options that decide all its claims (``Lab.check_options``), at a check ``level``
    (``ctxlab.levels``: 1 node health, 2 every documented claim, 3 everything, the default).

    All their scenarios share one pool of ``jobs`` child processes (default: the cores, at most 8), ordered by a
    ``baseline`` run's timings when given; ``schedule`` receives when each ran. A lab whose own code
    breaks becomes a result holding that error; the others go on. ``isolation="each"`` runs every scenario
    in a child of its own, also those that may share one (``Isolation.SHARED``).
    """
    from ctxlab.suite import run_check

    chosen = checked_selection(names, devices, timeout=timeout, jobs=jobs, repeats=repeats, registry=registry,
                               isolation=isolation, level=level)
    return run_check(list(chosen), list(devices), jobs=jobs, progress=progress, registry=registry,
                     baseline=list(baseline) if baseline else None, schedule=schedule, options=chosen)


def checked_selection(names: Sequence[str] | None, devices: Sequence[int], *, timeout: float | None = None,
                      jobs: int | None = None, repeats: int | None = None,
                      registry: dict[str, str] | None = None, isolation: str = "batched",
                      level: int = 3) -> dict[str, dict[int, LabOptions]]:
    """The labs ``check`` runs, each with its options per device (made, so validated, once), every argument
    validated first, as ``run`` validates its options: a name
    that is not a lab (``UnknownLab``), an empty or string selection, no device, a bad timeout, jobs or
    repeats (``OptionError``), no GPU or a device that does not exist (``NoGpu``, ``BadDevice``)."""
    from ctxlab.cuda.environment import require_device
    from ctxlab.labs import LABS, get_lab

    registry = registry or LABS
    if isinstance(names, str):
        raise OptionError(f"names: give a list of lab names, not the string {names!r}")
    chosen = list(registry) if names is None else list(names)
    if not chosen:
        raise OptionError("names: an empty list names no lab (None means every lab)")
    if not devices:
        raise OptionError("devices: an empty list names no GPU")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise OptionError(f"jobs: {jobs!r} is not a whole number of at least 1",
                          cli=f"--jobs: {jobs!r} is not a whole number of at least 1")
    refuse_repeats_below_full(level, repeats)
    labs = [get_lab(name, registry) for name in chosen]  # UnknownLab for a name that is not a lab
    from ctxlab.suite import check_options

    options = {name: {device: check_options(lab, device, timeout=timeout, isolation=isolation, level=level,
                                            repeats=repeats) for device in devices}
               for name, lab in zip(chosen, labs, strict=True)}
    if any(lab.needs_gpu for lab in labs):
        for device in devices:
            require_device(device)
    return options


def refuse_repeats_below_full(level: int, repeats: int | None) -> None:
    """OptionError for repeats asked of a level below the full one, which runs each scenario once."""
    if repeats is not None and level != 3:
        raise OptionError(f"repeats: level {level} runs each scenario once; repeats apply at level 3",
                          cli=f"--repeats: level {level} runs each scenario once; --repeats applies at --level 3")


def load(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES) -> list[LabResult]:
    """The runs in a result file (schema ctxlab/1); ``ResultFileError`` for anything else, a file larger
    than ``max_bytes`` (64 MiB by default, at most 1 TiB: it is read whole) included."""
    from ctxlab.records.files import load_runs

    return load_runs(path, max_bytes)


def claims(lab: str | Iterable[str] | None = None, *, names: Iterable[str] | None = None) -> tuple[Claim, ...]:
    """The catalogue: every claim of every lab, or of ``lab`` (a lab's name or several names), in lab order.

    ``names`` is the older name of ``lab``; an unknown name raises ``UnknownLab``."""
    from ctxlab.errors import OptionError
    from ctxlab.labs import get_lab

    if lab is not None and names is not None:
        raise OptionError("claims: give lab or names, not both")
    chosen = lab if lab is not None else names
    if isinstance(chosen, str):
        chosen = [chosen]
    selected = list(chosen) if chosen is not None else [each.name for each in labs()]
    return tuple(claim for name in selected for claim in get_lab(name).claims)


def trace(code: str | None = None, module: str | None = None, argv: Sequence[str] = (), *,
          calls: str = "context") -> tuple[int, list[dict], dict]:
    """Run a Python program in this process under the tracer, as ``ctxlab trace`` does: ``code`` (as ``-c``),
    ``module`` (as ``-m``) or a script ``argv[0]`` with its arguments. Returns its exit status, the recorded
    events (``ctxlab.trace.calls`` nests them) and the tracer's counts. Raises ``TraceUnavailable`` where
    tracing cannot start and ``FileNotFoundError`` for a missing script."""
    from ctxlab.tracing.supervise import trace_events

    return trace_events(code, module, argv, calls=calls)


def audit(code: str | None = None, module: str | None = None, argv: Sequence[str] = ()) -> Any:
    """Run a Python program in this process under the tracer and judge it, as ``ctxlab audit`` does: an
    ``AuditResult`` (findings, the program's exit status, counts)."""
    from ctxlab.audit.run import audit_code

    return audit_code(code, module, argv)


def doctor() -> dict:
    """What ``ctxlab doctor`` shows: the driver, runtimes, GPUs and libraries ctxlab would use, and what is
    ``missing`` (a list of one-line problems; empty when ctxlab can run). Creates no context."""
    from ctxlab.cuda.environment import doctor as found

    return found()


def merge(paths: Sequence[str | os.PathLike], max_bytes: int = DEFAULT_MAX_BYTES, *,
          limit_hint: str = "max_bytes raises it") -> list[tuple[str, list[LabResult]]]:
    """The results of several runners, as ``ctxlab report merge`` reads them: (path, its runs) for each file in
    order, each file checked and bounded (``ResultFileError`` naming the first that is refused). The matrix
    renderers of ``ctxlab.report.merge`` take this list."""
    from ctxlab.report.fleet_load import load_for_merge

    return load_for_merge([os.fspath(p) for p in paths], max_bytes, limit_hint=limit_hint)
