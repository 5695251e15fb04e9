"""GPU tests carry the marker ``gpu`` and are skipped, with the reason, where
there is no usable GPU; ``nogpu`` tests check the behaviour without one."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parent.parent / "labs" / "results"


@functools.lru_cache(maxsize=1)
def gpu_absence() -> str | None:
    """None where a GPU is usable; otherwise why not, in one line."""
    from ctxlab.cuda.environment import NoGpu, device_count

    try:
        return None if device_count() > 0 else "the driver reports no GPU"
    except NoGpu as exc:
        return str(exc)


def pytest_collection_modifyitems(config, items):
    absent = gpu_absence()
    for item in items:
        if "gpu" in item.keywords and absent:
            item.add_marker(pytest.mark.skip(reason=f"no GPU: {absent}"))
        if "nogpu" in item.keywords and not absent:
            item.add_marker(pytest.mark.skip(reason="a GPU is present: this checks the no-GPU behaviour"))


def recorded(name: str) -> dict:
    """A result recorded on a real GPU, committed under labs/results/."""
    return json.loads((RESULTS / name).read_text())


@pytest.fixture
def fake_registry(monkeypatch):
    """The test-only labs of tests/fake_labs stand in for the real ones; no GPU needed (device 0 stands in)."""
    import ctxlab.cli
    import ctxlab.labs
    import ctxlab.suite
    from tests.fake_labs import REGISTRY

    monkeypatch.setattr(ctxlab.labs, "LABS", REGISTRY)
    monkeypatch.setattr(ctxlab.suite, "LABS", REGISTRY)
    real = ctxlab.cli.parse_devices
    # Malformed lists still go through the parser.
    monkeypatch.setattr("ctxlab.cli.parse_devices", lambda text: [0] if text in ("0", "all") else real(text))
