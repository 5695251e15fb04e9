"""Result files from other runners are untrusted: every field escaped in every output format (issue 18)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from tests.hostile import HTML_EVIDENCE, HTML_HOST, hostile_run, invoke, write

RAW_HTML = re.compile(r"<(script|img|b)\b", re.I)


@pytest.fixture
def hostile(tmp_path):
    return write(tmp_path / "hostile.json", hostile_run())


def no_raw_html(text: str) -> None:
    assert not RAW_HTML.search(text), text
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text and "\x00" not in text


def test_show_markdown_escapes_html_and_markdown(hostile):
    result = invoke("show", hostile, "--format", "markdown")
    assert result.exit_code == 0, result.output
    no_raw_html(result.output)
    assert "&lt;script&gt;" in result.output
    assert "\\_\\_device\\_\\_" in result.output and " __device__" not in result.output
    assert "\\[x\\](javascript" in result.output  # no link forms
    assert "\\`code\\`" in result.output and "\\*star\\*" in result.output
    for line in result.output.splitlines():
        if line.startswith("| **fails**"):
            assert line.count(" | ") == 3  # the pipes in the data do not add cells


def test_merge_markdown_and_html_escape_hostname_and_evidence(hostile, tmp_path):
    html_path = tmp_path / "m.html"
    result = invoke("report", "merge", hostile, "--html", html_path, "-o", "-")
    assert result.exit_code == 1  # the hostile claim fails
    no_raw_html(result.output)
    assert "&lt;img src=x onerror=alert(1)&gt;" in result.output
    page = html_path.read_text()
    assert HTML_HOST not in page and "<script" not in page.lower()
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_check_summary_markdown_escapes_evidence(tmp_path):
    from ctxlab.records.shapes import runs_from_document
    from ctxlab.report.summary import summary_markdown

    runs = runs_from_document(hostile_run(), "hostile.json")
    text = summary_markdown(runs, [{"item": "__x__", "device": 0, "change": "verdict", "now": "fails",
                                    "was": HTML_EVIDENCE}])
    no_raw_html(text)
    assert "\\_\\_device\\_\\_" in text


def test_junit_is_well_formed_xml_without_control_characters(hostile):
    result = invoke("show", hostile, "--format", "junit")
    assert result.exit_code == 0, result.output
    no_raw_html(result.output)
    root = ET.fromstring(result.output.split("\n", 1)[1])
    evidence = root.find(".//failure").get("message")
    assert evidence.startswith(HTML_EVIDENCE)  # the text survives, as text


def test_json_output_keeps_data_but_escapes_control_characters(hostile):
    result = invoke("show", hostile, "--format", "json")
    assert result.exit_code == 0
    assert "\x1b" not in result.output and "\\u001b" in result.output


def test_terminal_escapes_in_evidence_do_not_reach_the_terminal(hostile):
    result = invoke("show", hostile)
    assert result.exit_code == 0, result.output
    for bad in ("\x1b", "\x9b", "\x07", "\x00", "]0;pwned"):
        assert bad not in result.output
    assert "[bold]not markup[/bold]" in result.output  # rich markup in data is shown, not applied
    assert "[x](javascript:alert(1))" in result.output.replace("\n", "").replace(" ", "") or "[x]" in result.output


def test_drift_lines_from_a_baseline_do_not_reach_the_terminal_raw():
    from ctxlab.report.escape import one_line

    assert one_line("was \x1b[2J\x1b]0;x\x07evil\nnext") == "was evil next"


@pytest.mark.parametrize("text, expected", [
    ("\x1b[31mred\x1b[0m", "red"), ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"), ("a\x9b2Jb", "ab"),
    ("a\x1bPdcs\x1b\\b", "ab"), ("tab\tnew\nline", "tab\tnew\nline"), ("\u202eevil", "evil"), ("a\rb", "ab"),
])
def test_terminal_escaper(text, expected):
    from ctxlab.report.escape import terminal

    assert terminal(text) == expected


def test_markdown_escaper_keeps_entities_whole():
    from ctxlab.report.escape import markdown

    assert markdown("it's <b> & __x__ | y") == "it's &lt;b&gt; &amp; \\_\\_x\\_\\_ \\| y"
