"""Result files as another machine might send them: valid ones to mutate, and hostile fields."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from ctxlab.cli import cli

HTML_HOST = "<img src=x onerror=alert(1)>"
HTML_EVIDENCE = '<script>alert("e")</script>'
TERMINAL_ESCAPES = "\x1b[2J\x1b[31mred\x1b[0m\x1b]0;pwned\x07\x9b31m\x00bell\x07"


def claim(verdict: str = "holds", **fields) -> dict:
    out = {"id": "demo.claim", "statement": "A statement.", "source": "A source", "verdict": verdict,
           "evidence": "what we saw"}
    out.update(fields)
    return out


def run(lab: str = "demo", claims: list[dict] | None = None, **fields) -> dict:
    """A valid run (schema ctxlab/1) with the given fields replaced."""
    out = {"schema": "ctxlab/1", "lab": lab, "started": "2026-11-30T00:00:00+00:00", "seconds": 1.5,
           "environment": {"gpu": "NVIDIA H200", "device": 0, "driver_version": 13000, "runtime_version": 13020,
                           "hostname": "runner-1"},
           "options": {"device": 0},
           "observations": [{"step": "setup", "thread": "worker-1", "context_id": 1, "context": 42,
                             "what": "context made", "value": {"handle": 42}, "scenario": "s", "round": 0}],
           "claims": claims if claims is not None else [claim()]}
    out.update(fields)
    return out


def hostile_run() -> dict:
    """Every text field a report shows, filled with HTML, Markdown and terminal control."""
    return run(lab="__device__",
               environment={"gpu": "**GPU** |pipe|", "device": 0, "driver_version": 13000,
                            "runtime_version": 13020, "hostname": HTML_HOST},
               claims=[claim("fails", id="__device__.[x](javascript:alert(1))",
                             statement="`code` *star* _u_ | pipe\nnewline [bold red]markup[/]",
                             source="<b>source</b> & more",
                             evidence=HTML_EVIDENCE + TERMINAL_ESCAPES + "[bold]not markup[/bold]")],
               errors=[{"scenario": "<script>s</script>", "kind": "crash", "message": HTML_EVIDENCE + "\x1b[2J",
                        "output_tail": "tail \x1b[31m" + HTML_EVIDENCE}])


def write(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


def invoke(*args: str) -> Result:
    """The CLI as a user runs it; exceptions other than exit statuses surface as the result's exception."""
    return CliRunner().invoke(cli, [str(a) for a in args])


def assert_one_line_exit_2(result: Result) -> None:
    """A usage or input problem: exit 2, one line, no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "Traceback" not in result.output


def assert_usage_error(result: Result, text: str) -> None:
    """A bad option value: exit 2 and one line, the error that says what is wrong with the hint folded in."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and text in lines[0], result.output
