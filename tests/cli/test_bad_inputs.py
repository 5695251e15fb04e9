"""The bad inputs that still broke (issue 26): each one a traceback, a wrong file or a raw escape before."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import RESULTS
from tests.hostile import assert_one_line_exit_2, claim, invoke, run, write
from tests.records.test_output import device_node, leftovers

M = RESULTS / "migrate.json"
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")


def surrogate_result(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(run(claims=[claim(evidence="bad \ud800 half")])))  # written as the escape \ud800
    assert "\\ud800" in path.read_text()
    return path


def test_1_an_absurd_max_size_is_one_line_not_an_overflow():
    result = invoke("show", M, "--max-size", "99999999999999999999999999G")
    assert_one_line_exit_2(result)
    assert "--max-size" in result.output
    assert_one_line_exit_2(invoke("show", M, "--max-size", "2000G"))


def test_1_the_api_refuses_a_limit_that_is_not_a_size():
    import ctxlab
    from ctxlab.lab import OptionError

    with pytest.raises(OptionError, match="max_bytes"):
        ctxlab.load(M, max_bytes=10**30)
    with pytest.raises(OptionError, match="max_bytes"):
        ctxlab.load(M, max_bytes=0)
    assert ctxlab.load(M, max_bytes=2**20)[0].lab == "migrate"


@pytest.mark.parametrize("args", [[], ["--format", "markdown", "-o", "{tmp}/s.md"], ["--html", "{tmp}/s.html"],
                                  ["--format", "junit"], ["--steps"]])
def test_2_a_lone_surrogate_in_evidence_renders(tmp_path, args):
    result = invoke("show", surrogate_result(tmp_path), *(a.format(tmp=tmp_path) for a in args))
    assert result.exit_code == 0, result.output
    written = [p for p in tmp_path.iterdir() if p.suffix in (".md", ".html")]
    text = written[0].read_text() if written else result.output
    if "--html" not in args:
        assert "bad \ufffd half" in text or "bad  half" in text  # XML drops what it cannot hold
    assert "\ud800" not in text


@pytest.mark.parametrize("command", [["claims"], ["show", str(M)], ["show", str(M), "--format", "json"]])
def test_3_a_closed_standard_output_is_one_line(command):
    done = subprocess.run([sys.executable, "-m", "ctxlab", *command], capture_output=False, text=True,
                          stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1),
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == ["Error: cannot write output: -: standard output is closed "
                                                "(give a file with --output)"]


def test_4_a_regular_file_under_dev_shm_is_replaced_not_appended():
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm here")
    path = f"/dev/shm/ctxlab-test-{os.getpid()}.json"
    try:
        with open(path, "w") as handle:
            handle.write("old contents\n")
        result = invoke("show", M, "--format", "json", "-o", path)
        assert result.exit_code == 0, result.output
        with open(path) as handle:
            assert json.load(handle)["lab"] == "migrate"  # the whole file is the report
    finally:
        os.unlink(path)


def test_4_an_open_file_named_through_dev_fd_is_still_written_in_place(tmp_path):
    out = tmp_path / "redirected.txt"
    with open(out, "w") as shell_redirect:
        shell_redirect.write("earlier\n")
        shell_redirect.flush()
        assert invoke("show", M, "--format", "json", "-o", f"/dev/fd/{shell_redirect.fileno()}").exit_code == 0
    assert out.read_text().startswith("earlier\n{")


def test_5_show_writes_the_page_and_the_report_all_or_none(tmp_path):
    full = device_node(tmp_path / "full", "/dev/full")
    page = tmp_path / "t.html"
    result = invoke("show", M, "--html", page, "-o", full)
    assert_one_line_exit_2(result)
    assert not page.exists() and leftovers(tmp_path) == []


def test_6_show_refuses_the_same_path_for_the_report_and_the_page(tmp_path):
    path = tmp_path / "s.html"
    result = invoke("show", M, "-o", path, "--html", path)
    assert_one_line_exit_2(result)
    assert "named twice" in result.output and not path.exists()


def test_7_a_path_ending_in_a_slash_is_never_written_as_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in (["show", M, "-o", "newdir/"], ["report", "merge", M, "--html", "newdir/"],
                    ["claims", "-o", "newdir/"]):
        result = invoke(*command)
        assert_one_line_exit_2(result)
        assert "directory" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["a\x1b]0;pwned\x07b.json", "a\x1b[2J\x1b[31mb.json", "a\x9b31mb\u202e.json"])
def test_8_escape_sequences_in_a_file_name_are_written_out_in_the_error_line(tmp_path, name):
    for command in (["show", str(tmp_path / name)], ["report", "merge", str(tmp_path / name)],
                    ["show", M, "-o", str(tmp_path / "no dir" / name)]):
        result = invoke(*command)
        assert_one_line_exit_2(result)
        assert not CONTROLS.search(result.output), repr(result.output)
        assert "\\x1b" in result.output or "\\x9b" in result.output


def test_9_the_timeline_page_holds_no_control_character(tmp_path):
    nasty = "s\x1b[31m\x07\x00\r\x7f\x85\u202eend"
    doc = run(observations=[{"step": nasty, "thread": nasty, "context_id": 1, "context": 42, "what": nasty,
                             "value": {"v": nasty}, "scenario": nasty, "round": 0}])
    page = tmp_path / "t.html"
    result = invoke("show", write(tmp_path / "r.json", doc), "--html", page)
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "end" in text and not CONTROLS.search(text.replace("\n", "")), repr(CONTROLS.findall(text))


def test_11_an_empty_file_name_is_refused_as_empty():
    for command in (["show", ""], ["report", "merge", ""], ["check", "--baseline", ""]):
        result = invoke(*command)
        assert_one_line_exit_2(result)
        assert "empty file name" in result.output, result.output


def test_11_audit_of_a_directory_says_it_is_one(tmp_path):
    result = invoke("audit", "--", tmp_path)
    assert_one_line_exit_2(result)
    assert "is a directory" in result.output and "not found" not in result.output
    assert "is a directory" in invoke("trace", "--", tmp_path).output


def test_11_merge_refuses_standard_output_twice():
    result = invoke("report", "merge", M, "-o", "-", "--markdown", "-")
    assert_one_line_exit_2(result)
    assert "named twice" in result.output and "| claim |" not in result.output


@pytest.mark.parametrize("command", [["audit", "-c", "pass"], ["trace", "-c", "pass"]])
def test_11_without_a_gpu_audit_and_trace_give_the_no_gpu_line(monkeypatch, command):
    """On a machine with CUPTI and no GPU they said "CUPTI could not subscribe"; every other command says no GPU."""
    import ctxlab.audit.run
    import ctxlab.cli.tracing
    import ctxlab.cuda.environment
    from ctxlab.cuda.environment import NoGpu
    from ctxlab.trace import TraceUnavailable

    def subscribe(*args, **kwargs):
        raise TraceUnavailable("CUPTI could not subscribe: CUPTI_ERROR_NOT_INITIALIZED")

    def no_gpu():
        raise NoGpu("cuInit: CUDA_ERROR_NO_DEVICE")

    monkeypatch.setattr(ctxlab.audit.run, "audit_program", subscribe)
    monkeypatch.setattr(ctxlab.cli.tracing, "run_traced", subscribe)
    monkeypatch.setattr(ctxlab.cuda.environment, "device_count", no_gpu)
    result = invoke(*command)
    assert_one_line_exit_2(result)
    assert result.output.startswith("Error: no usable GPU: cuInit: CUDA_ERROR_NO_DEVICE (ctxlab doctor")
