"""What trace and audit share on the command line: one program to run, and why the tracer cannot start."""

from __future__ import annotations

import os

import click

from ctxlab.cli_types import CtxlabError, no_gpu_line


def one_program(code: str | None, module: str | None, script_args: tuple, output: str | None) -> None:
    """trace and audit run exactly one program (a SCRIPT, -c CODE or -m MODULE) and check --output first."""
    chosen = [x for x in (code, module, script_args[0] if script_args else None) if x]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one program: a SCRIPT (after --), -c CODE or -m MODULE")
    if code is None and module is None and os.path.isdir(script_args[0]):
        raise CtxlabError(f"{script_args[0]}: is a directory, not a Python script (give the script's file, "
                          "or -m MODULE)")
    if output:
        from ctxlab.output import check_writable

        check_writable(output)


def tracer_unavailable(exc: Exception) -> CtxlabError:
    """Why trace or audit cannot run: the no-GPU line every command gives where there is no GPU (CUPTI
    cannot subscribe without one), else what the tracer said."""
    from ctxlab.cuda.environment import NoGpu, device_count

    try:
        count = device_count()
    except NoGpu as none:
        return CtxlabError(no_gpu_line(none))
    except Exception:  # the driver broke in some other way: what the tracer said is the better line
        count = 1
    if count == 0:
        return CtxlabError(no_gpu_line("the driver reports no GPU"))
    return CtxlabError(" ".join(str(exc).split()))
