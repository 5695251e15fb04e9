"""``ctxlab audit``: find CUDA context hazards in any Python program.

The program runs in a traced child (``observe.py`` there; ``ctxlab.tracing`` records every call into a flight
recorder the parent reads however the child ends); the parent replays the calls into a model of each thread's
CUDA state (``state.py``) and runs the rules (``rules.py``: explanations on top of the model) over it
(``engine.py``); ``report.py`` writes the findings as a table, JSON, JUnit or SARIF. ``guard.py`` and
``pytest_plugin.py`` apply the same rules per test (``pytest --ctxlab-guard``). Nothing here imports CUDA
until a program is audited, and the child imports only what it runs the program with (the names below are
loaded when first used).

    from ctxlab.audit import audit_program
    result = audit_program(argv=["examples/hazards/no_context.py"])
    for finding in result.findings:
        print(finding.rule, finding.location, finding.message)
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["AuditResult", "EXIT_HAZARD", "Finding", "Location", "RULES", "RULES_BY_ID", "Rule", "audit_program",
           "judge"]
_HOMES = {"Finding": "engine", "Location": "engine", "RULES": "rules", "RULES_BY_ID": "rules", "Rule": "rules",
          "judge": "rules", "EXIT_HAZARD": "run", "AuditResult": "run", "audit_code": "run", "audit_program": "run"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value

