"""pytest plugin (entry point ``pytest11``): ``pytest --ctxlab-guard`` fails tests that leak a CUDA context,
leave another context current, leave a primary context inactive, or trigger an error hazard of
``ctxlab audit``. Without the flag it does nothing and loads nothing; with it, one tracer records the
whole session and each test's events are judged by ``ctxlab.audit.guard.judge_test`` after its teardown: a
wrapper around pytest's own run of the test, as pytest's faulthandler plugin wraps it; a problem fails the
test's teardown. Children the tests fork are not watched (use ``ctxlab audit`` for fork-after-init).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ctxlab.audit.guard import Snapshot


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
        from ctxlab.audit.child.observe import tracer_options
        from ctxlab.audit.model.hooks import AuditHooks
        from ctxlab.tracing.tracer import Tracer, TraceUnavailable

        try:
            self.tracer = Tracer(**tracer_options(AuditHooks())).__enter__()
        except TraceUnavailable as exc:
            raise pytest.UsageError(f"--ctxlab-guard cannot trace: {exc}") from None
        self.known_primary: set[int] = set()
        self.failed: list[str] = []
        self._before: dict[str, Snapshot] = {}  # nodeid -> the state before its setup, while it runs

    def _initialised(self) -> bool:
        return bool(self.tracer.cuda_initialised or self.tracer.stats.get("callbacks"))

    def pytest_unconfigure(self, config) -> None:
        """Stops the tracer at the end of the session."""
        self.tracer.close()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """Around pytest's own run of one test (setup, call, teardown): the context state before its setup."""
        from ctxlab.audit.guard import snapshot
        from ctxlab.audit.model.facts import primary_handles

        before = snapshot(self._initialised())
        self.known_primary |= set(before.primary_handles) | primary_handles(self.tracer.drain())
        self._before[item.nodeid] = before
        try:
            yield
        finally:
            self._before.pop(item.nodeid, None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        """After the test's teardown: the state it left and the calls it made, judged; a problem fails the
        teardown (what the test left behind is found only once its fixtures are gone), and a test that failed
        on its own keeps its report with the guard's as a second."""
        outcome = yield
        before = self._before.get(item.nodeid)
        if call.when != "teardown" or before is None:
            return
        from ctxlab.audit.guard import judge_test, snapshot
        from ctxlab.audit.model.facts import primary_handles

        events = self.tracer.drain()
        after = snapshot(self._initialised())
        problems = judge_test(events, before, after, self.known_primary)
        self.known_primary |= set(after.primary_handles) | primary_handles(events)
        if not problems:
            return
        report = outcome.get_result()
        text = "\n".join(p.as_text() for p in problems)
        text += f"\nctxlab guard: before the test: {before.as_text()}; after it: {after.as_text()}"
        self.failed.append(item.nodeid)
        if report.passed:
            report.outcome = "failed"
            report.longrepr = text
        else:
            report.sections.append(("ctxlab guard", text))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """Names the tests that failed the guard, with the rule."""
        if self.failed:
            terminalreporter.write_line(f"ctxlab guard: {len(self.failed)} test(s) failed the guard: "
                                        + ", ".join(self.failed))
