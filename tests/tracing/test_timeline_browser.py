"""The HTML timeline in a real headless browser: it loads without console errors and draws one lane per
thread. Needs Playwright and a Chromium (the system's: set CTXLAB_CHROMIUM to its path, or have
chromium on PATH); skipped, saying which is missing, where they are not installed.

CTXLAB_SCREENSHOT=FILE also saves a screenshot of labs/results/migrate.json's timeline there."""

import os
import shutil

import pytest

from ctxlab.records.files import load_runs
from ctxlab.report.timeline import render_html
from tests.conftest import RESULTS


def chromium() -> str:
    path = os.environ.get("CTXLAB_CHROMIUM") or next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome", "chrome")) if p), None)
    if not path:
        pytest.skip("no Chromium installed (apt-get install chromium, or set CTXLAB_CHROMIUM)")
    return path


@pytest.fixture
def browser():
    sync = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
    with sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.mark.parametrize("result", ["migrate.json", "refcount.json"])
def test_the_timeline_loads_without_errors_and_draws_a_lane_per_thread(browser, tmp_path, result):
    (run,) = load_runs(RESULTS / result)
    page_file = tmp_path / "timeline.html"
    page_file.write_text(render_html([run]))
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith("file:") else None)
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    assert errors == [] and requests == []
    for scenario in {o.scenario for o in run.observations}:
        threads = {o.thread for o in run.observations if o.scenario == scenario}
        svg = page.locator(f'svg[data-scenario="{scenario}"]')
        assert svg.locator("g.lane").count() == len(threads)
        box = svg.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 50  # drawn, not just present
    cells = page.locator("g.cell rect")
    assert cells.count() == len(run.observations)
    assert cells.first.bounding_box()["width"] > 10
    shot = os.environ.get("CTXLAB_SCREENSHOT")
    if shot and result == "migrate.json":
        page.screenshot(path=shot, full_page=True)
