"""``ctxlab status``: a recorded result as one line and an exit status, for node health checks."""

from __future__ import annotations

import click

from ctxlab.cli.options import max_size_option
from ctxlab.cli.types import FiniteFloat, OneLineCommand


@click.command(cls=OneLineCommand)
@click.argument("result", type=click.Path(dir_okay=False))
@click.option("--max-age", type=FiniteFloat(min=0), default=None, metavar="SECONDS",
              help="Seconds after which the file is stale: the status is then unknown (2).")
@click.option("--limit", type=click.IntRange(min=20), default=240, show_default=True,
              help="Characters of the line at most (a drain reason or a condition message).")
@max_size_option
def status(result, max_age, limit, max_size):
    """One line and an exit status from a recorded check result, for fleets.

    \b
      ctxlab status /var/lib/ctxlab/ctxlab.json --max-age 86400
      ctxlab status check.json --limit 200
      ctxlab status big-check.json --max-size 1G

    Exit 0 when every claim holds (or is what was observed), 1 on a problem
    (a claim fails or errs, a scenario broke, fewer claims were judged than
    the run's level promises on the node, or the node could not run at
    all), 2 when it is unknown (the file is missing, unreadable, not a
    result, or older than --max-age). The line is plain text without quotes:
    what Kubernetes' Node Problem Detector shows as the condition's message
    and what Slurm's health check gives as the drain reason.
    """
    from ctxlab.report.status import status_of

    code, line = status_of(result, max_age, limit, max_size, limit_hint="--max-size raises it")
    click.echo(line)
    raise SystemExit(code)
