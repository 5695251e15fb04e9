"""The merged HTML in a real browser: hostile fields from another runner never run as script.

Needs Chromium (Debian's ``chromium``); skipped with the reason where there is none.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.conftest import RESULTS
from tests.hostile import claim, invoke, run, write

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")

PAYLOADS = {
    "hostname": "<img src=x onerror=\"document.body.setAttribute('data-pwned-host','1')\">",
    "evidence": "<script>document.body.setAttribute('data-pwned-evidence','1')</script>",
    "claim": "x<svg onload=\"document.body.setAttribute('data-pwned-claim','1')\">",
    "lab": "</th><script>document.body.setAttribute('data-pwned-lab','1')</script>",
}


def dom_after_scripts(page) -> str:
    result = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=2000",
                             "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=60)
    return result.stdout


def body_tag(dom: str) -> str:
    return re.search(r"<body[^>]*>", dom).group(0)


def test_the_harness_sees_a_script_that_runs(tmp_path):
    page = tmp_path / "control.html"
    page.write_text("<!doctype html><body>" + PAYLOADS["evidence"] + PAYLOADS["hostname"])
    assert "data-pwned-evidence" in body_tag(dom_after_scripts(page))


def test_hostile_fields_in_the_merged_html_do_not_run(tmp_path):
    hostile = write(tmp_path / "hostile.json", run(
        lab=PAYLOADS["lab"], environment={"hostname": PAYLOADS["hostname"], "device": 0, "gpu": "H200",
                                          "driver_version": 13000, "runtime_version": 13020},
        claims=[claim("fails", id=PAYLOADS["claim"], evidence=PAYLOADS["evidence"])],
        errors=[{"scenario": PAYLOADS["evidence"], "kind": "crash", "message": PAYLOADS["evidence"]}]))
    page = tmp_path / "matrix.html"
    result = invoke("report", "merge", RESULTS / "check.json", RESULTS / "check-all-devices.json", hostile,
                    "--format", "html", "--output", page)
    assert result.exit_code == 1, result.output
    dom = dom_after_scripts(page)
    assert "<table" in dom
    assert "data-pwned" not in body_tag(dom)
    assert "&lt;img src=x onerror=" in dom  # shown as text
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1600,1200",
                    f"--screenshot={tmp_path / 'matrix.png'}", page.as_uri()], capture_output=True, timeout=60)
    assert (tmp_path / "matrix.png").stat().st_size > 0
