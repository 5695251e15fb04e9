"""GPU tests carry the marker ``gpu`` and are skipped, with the reason, where
there is no usable GPU; ``nogpu`` tests check the behaviour without one."""

from __future__ import annotations

import functools
import json
import os
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


ALONE_TEST = "tests/house/test_each_file_alone.py::test_each_test_file_passes_alone"


def run_alone_only(config, items) -> None:
    """Where the each-file-alone test is in the session (and not skipped), the files marked ``alone`` run there
    only, each in a pytest of its own, and are not run a second time in the session: they are the heaviest (their
    tests start fresh processes, or property tests), and a file run alone is the stronger test of the two."""
    if os.environ.get("CTXLAB_SKIP_ALONE") == "1" or not any(i.nodeid.endswith(ALONE_TEST) for i in items):
        return
    deselected = [i for i in items if i.get_closest_marker("alone") is not None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [i for i in items if i.get_closest_marker("alone") is None]


@pytest.hookimpl(trylast=True)  # after -k, -m and --deselect: a session whose alone test they removed keeps the files
def pytest_collection_modifyitems(config, items):
    run_alone_only(config, items)
    if not any("gpu" in item.keywords or "nogpu" in item.keywords for item in items):
        return  # no GPU question asked: the driver is not even looked for (a file's pytest of its own starts faster)
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


# ---------------------------------------------------------------- trace and audit on CPU: a recorded stream

class Replay:
    """The recorded stream the child's tracer stand-in hands over (tests/replay_tracer.py), and what the child
    asked of its tracer."""

    def __init__(self, folder) -> None:
        self.folder = folder
        self.options_path = folder / "tracer-options.json"

    @property
    def EVENTS(self) -> list:  # noqa: N802 (the stream, as the tests set it)
        path = self.folder / "events.json"
        return json.loads(path.read_text()) if path.exists() else []

    @EVENTS.setter
    def EVENTS(self, events: list) -> None:  # noqa: N802
        (self.folder / "events.json").write_text(json.dumps(events))

    @property
    def options(self) -> dict:
        return json.loads(self.options_path.read_text())


@pytest.fixture
def fake(monkeypatch, tmp_path_factory):
    from tests import replay_tracer

    folder = tmp_path_factory.mktemp("replay")
    replay = Replay(folder)
    replay.EVENTS = []
    monkeypatch.setattr("ctxlab.tracing.supervise.TRACER", replay_tracer.NAME)
    monkeypatch.setenv(replay_tracer.EVENTS, str(folder / "events.json"))
    monkeypatch.setenv(replay_tracer.OPTIONS, str(replay.options_path))
    monkeypatch.delenv(replay_tracer.INITIALISED, raising=False)
    return replay


