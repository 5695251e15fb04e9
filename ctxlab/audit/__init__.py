"""``ctxlab audit``: find CUDA context hazards in any Python program.

The program runs under the tracer (``ctxlab.trace``); the rules (``rules.py``), each tied to the lab
claim that demonstrates its hazard, judge the recorded events (``engine.py``); ``report.py`` writes
the findings as a table, JSON, JUnit or SARIF. ``guard.py`` and ``pytest_plugin.py`` apply the same
rules per test (``pytest --ctxlab-guard``). Nothing here imports CUDA until a program is audited.

    from ctxlab.audit import audit_program
    result = audit_program(argv=["examples/hazards/no_context.py"])
    for finding in result.findings:
        print(finding.rule, finding.location, finding.message)
"""

from __future__ import annotations

from ctxlab.audit.engine import Finding, Location
from ctxlab.audit.rules import RULES, RULES_BY_ID, Rule, judge
from ctxlab.audit.run import EXIT_HAZARD, AuditResult, audit_code, audit_program
from ctxlab.calling import make_callable

__all__ = ["AuditResult", "EXIT_HAZARD", "Finding", "Location", "RULES", "RULES_BY_ID", "Rule", "audit_program",
           "judge"]


make_callable(__name__, audit_code)  # ctxlab.audit(argv=[...]) audits a program
