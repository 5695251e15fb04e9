"""``ctxlab report merge``: the command over ``ctxlab.report.merge`` (the matrix) and its views."""

from __future__ import annotations

import sys

import click

from ctxlab.cli.options import max_size_option, output_option, overwrite_input_option
from ctxlab.cli.report import screen_of
from ctxlab.cli.types import EXIT_FAILS, OneLineGroup, OutputPath, ResultPath, domain_errors


@click.group(cls=OneLineGroup)
def report():
    """Combine recorded results: one matrix of claims against runners.

    \b
      ctxlab report merge a.json b.json --html matrix.html
    """


@report.command()
@click.argument("files", nargs=-1, required=True, type=ResultPath())
@click.option("--format", "fmt", type=click.Choice(["markdown", "html", "table"]), default=None,
              show_default="markdown; table on a terminal",
              help="Format of the matrix --output gets: markdown, a standalone HTML page, or a table fitted to "
                   "the terminal (runners numbered, verdicts coloured).")
@output_option
@click.option("--markdown", "markdown_path", type=OutputPath(), default=None,
              help="Also write the matrix as Markdown here.")
@click.option("--html", "html_path", type=OutputPath(), default=None, help="Also write the matrix as HTML here.")
@max_size_option
@overwrite_input_option
@domain_errors
def merge(files, fmt, output, markdown_path, html_path, max_size):
    """One matrix of claims against runners from the results of several runners.

    \b
      ctxlab report merge a.json b.json
      ctxlab report merge runners/*.json --html matrix.html -o matrix.md

    A column is one runner and device (hostname, device index, GPU UUID where
    recorded, driver, runtime); files that share that key stay separate columns,
    marked duplicate. Runners of 2+ groups (GPU, driver, runtime, ctxlab) get
    "where the fleet differs" first; runners that could not run are listed
    apart. Result files are data from other machines and are treated as
    untrusted. Exit status 1 when any cell fails or errs or a runner could not
    run; all outputs are written, or none.
    """
    import ctxlab.api
    from ctxlab.output import check_outputs, write_outputs
    from ctxlab.report.merge import failing, render_html, render_markdown
    from ctxlab.report.merge_table import render_table

    reports = [(kind, path) for kind, path in (("markdown", markdown_path), ("html", html_path)) if path]
    if output or fmt or not markdown_path:  # the matrix goes to standard output unless it went to a file
        target = output or "-"
        on_terminal = target == "-" and sys.stdout is not None and sys.stdout.isatty()
        reports.insert(0, (fmt or ("table" if on_terminal else "markdown"), target))
    check_outputs([path for _, path in reports])
    loaded = ctxlab.api.merge(files, max_size, limit_hint="--max-size raises it")
    render = {"markdown": render_markdown, "html": render_html}
    write_outputs([(path, render_table(loaded, screen_of(path)) if kind == "table" else render[kind](loaded))
                   for kind, path in reports])
    if failing(loaded):
        raise SystemExit(EXIT_FAILS)


