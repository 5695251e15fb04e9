"""``ctxlab status``: a recorded result as one line and an exit status (0 ok, 1 a problem, 2 unknown), the
command of the one CLI the fleet recipes call."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pytest
from click.testing import CliRunner

from ctxlab.cli import cli
from ctxlab.records.files import load_runs
from ctxlab.records.model import dumps
from tests.conftest import RESULTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = str(RESULTS / "check.json")


def status(*args):
    return CliRunner().invoke(cli, ["status", *args])


def test_a_recorded_check_reads_ok_in_one_line():
    done = status(CHECK)
    assert done.exit_code == 0 and done.output == "ctxlab: ok: 137 claims on NVIDIA H200, none fails\n"


def test_a_failing_claim_is_a_problem_named_in_the_line(tmp_path):
    runs = load_runs(CHECK)
    first = runs[0]
    claims = (dataclasses.replace(first.claims[0], verdict="fails"), *first.claims[1:])
    path = tmp_path / "failing.json"
    path.write_text(dumps([dataclasses.replace(first, claims=claims), *runs[1:]]))
    done = status(str(path), "--limit", "60")
    assert done.exit_code == 1 and done.output.startswith(f"ctxlab: fails: {first.claims[0].id}"[:57])
    assert len(done.output.strip()) <= 60 and '"' not in done.output


def test_missing_stale_or_foreign_files_are_unknown(tmp_path):
    assert status(str(tmp_path / "none.json")).exit_code == 2
    old = tmp_path / "old.json"
    old.write_text(open(CHECK).read())
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    stale = status(str(old), "--max-age", "3600")
    assert stale.exit_code == 2 and "s old (more than 3600)" in stale.output
    assert status(str(old)).exit_code == 0  # no age asked: as recorded
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"hello": "world"}))
    assert status(str(foreign)).exit_code == 2


@pytest.mark.parametrize("args", [["--limit", "5"], ["--limit", "many"], ["--max-age", "nan"],
                                  ["--max-age", "-1"], []])
def test_bad_options_are_one_line_usage_errors(args):
    done = status(*([CHECK] if args else []), *args)
    assert done.exit_code == 2 and "Traceback" not in done.output
    assert len([line for line in done.output.splitlines() if line.strip()]) <= 2  # Usage line and the error


def test_the_command_list_shows_status():
    assert "status" in CliRunner().invoke(cli, ["--help"]).output


def test_a_result_over_the_size_limit_says_the_option_that_raises_it_and_max_size_does(tmp_path):
    done = status(CHECK, "--max-size", "1K")
    assert done.exit_code == 2 and "--max-size raises it" in done.output and "max_bytes" not in done.output
    assert status(CHECK, "--max-size", "64M").exit_code == 0


def test_a_path_that_cannot_be_read_is_named_as_show_and_merge_name_it(tmp_path):
    loop = tmp_path / "loop1"
    os.symlink("loop1", loop)
    done = status(str(loop))
    assert done.exit_code == 2
    assert done.output == f"ctxlab: unknown: {loop}: cannot read (Too many levels of symbolic links)\n"
    assert "[Errno" not in status(str(tmp_path / "missing.json")).output
