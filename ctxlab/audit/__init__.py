"""``ctxlab audit``: find CUDA context hazards in any Python program.

Laid out as the layers it is, each importing only those below it (``tests/house/test_structure.py``):

- ``events.py``: the one vocabulary (the families of calls, the names of the child's notes);
- ``engine.py``: the recorded stream (``Stream``) and what a rule finds (``Hit``, ``Finding``, its because);
- ``child/``: what runs in the traced process (``observe.py`` runs the program under the tracer; the allocator,
  hand-over and fork watches); ``ctxlab.tracing`` records every call into a flight recorder the parent reads
  however the child ends;
- ``model/``: the state the calls build (``state.py``: each thread's current context, handles, allocations and
  failing calls; ``ordering.py``: what happens before what), and the causes findings draw on;
- ``rules/``: the rules, queries on the models, each declared beside its predicate, gathered in run order by
  ``catalogue.py``;
- ``run.py`` wires them for ``ctxlab audit``; ``report.py`` writes the findings as a table, JSON, JUnit or SARIF;
  ``guard.py`` and ``pytest_plugin.py`` apply the same rules per test (``pytest --ctxlab-guard``).

Nothing here imports CUDA until a program is audited, and the child imports only what it runs the program with
(the names below are loaded when first used).

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
_HOMES = {"Finding": "engine", "Location": "engine", "RULES": "rules.catalogue", "RULES_BY_ID": "rules.catalogue",
          "Rule": "rules.rule", "judge": "rules.catalogue", "EXIT_HAZARD": "run", "AuditResult": "run",
          "audit_code": "run", "audit_program": "run"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value

