"""pytest plugin (entry point ``pytest11``): ``pytest --ctxlab-guard`` fails tests that leak a CUDA context,
leave another context current, leave a primary context inactive, or trigger an error hazard of
``ctxlab audit``. Without the flag it does nothing and loads nothing; with it, one tracer records the
whole session and each test's events are judged by ``ctxlab.audit.guard.judge_test``. Children the
tests fork are not watched (use ``ctxlab audit`` for fork-after-init).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser) -> None:
    """Adds --ctxlab-guard to pytest's options."""
    group = parser.getgroup("ctxlab", "CUDA context hazards (ctxlab)")
    group.addoption("--ctxlab-guard", action="store_true", default=False,
                    help="Fail a test that leaks a CUDA context, leaves another context current, leaves a primary "
                         "context inactive, or triggers a ctxlab audit error hazard (needs CUPTI and a GPU).")


def pytest_configure(config) -> None:
    """Registers the guard when --ctxlab-guard is given."""
    if config.getoption("ctxlab_guard", default=False):
        config.pluginmanager.register(Guard(), "ctxlab-guard")


class Guard:
    """One tracer for the session; before and after each test, a snapshot and the events in between."""

    def __init__(self) -> None:
        from ctxlab.audit.hooks import AuditHooks
        from ctxlab.audit.observe import tracer_options
        from ctxlab.tracing.tracer import Tracer, TraceUnavailable

        try:
            self.tracer = Tracer(**tracer_options(AuditHooks())).__enter__()
        except TraceUnavailable as exc:
            raise pytest.UsageError(f"--ctxlab-guard cannot trace: {exc}") from None
        self.known_primary: set[int] = set()
        self.failed: list[str] = []

    def _initialised(self) -> bool:
        return bool(self.tracer.cuda_initialised or self.tracer.stats.get("callbacks"))

    def pytest_unconfigure(self, config) -> None:
        """Stops the tracer at the end of the session."""
        self.tracer.close()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """Runs one test between two snapshots of the context state and judges what changed."""
        from _pytest.runner import runtestprotocol

        from ctxlab.audit.facts import primary_handles
        from ctxlab.audit.guard import judge_test, snapshot

        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        before = snapshot(self._initialised())
        self.known_primary |= set(before.primary_handles) | primary_handles(self.tracer.drain())
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        events = self.tracer.drain()
        after = snapshot(self._initialised())
        problems = judge_test(events, before, after, self.known_primary)
        self.known_primary |= set(after.primary_handles) | primary_handles(events)
        if problems:
            text = "\n".join(p.as_text() for p in problems)
            text += f"\nctxlab guard: before the test: {before.as_text()}; after it: {after.as_text()}"
            self.failed.append(item.nodeid)
            target = next((r for r in reports if r.when == "call"), None) or reports[-1]
            if target.passed:
                target.outcome = "failed"
                target.longrepr = text
            else:
                target.sections.append(("ctxlab guard", text))
        for report in reports:
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """Names the tests that failed the guard, with the rule."""
        if self.failed:
            terminalreporter.write_line(f"ctxlab guard: {len(self.failed)} test(s) failed the guard: "
                                        + ", ".join(self.failed))
