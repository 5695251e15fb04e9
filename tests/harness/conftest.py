"""Fixtures of the check's end-to-end tests (stand-in labs, no GPU)."""

from __future__ import annotations

import pytest


@pytest.fixture
def environment(monkeypatch):
    """Set the environment record the runs are made with (this machine has no GPU to read one from)."""
    import ctxlab.harness.pool

    def use(record: dict) -> None:
        monkeypatch.setattr(ctxlab.harness.pool, "environment_of", lambda device: {"device": device, **record})
    return use
