"""The labs: one module each, with NAME, CLAIMS and run(options) -> LabResult."""

from __future__ import annotations

import importlib

LABS = {
    "migrate": "ctxlab.labs.migrate",
    "refcount": "ctxlab.labs.refcount",
    "lifecycle": "ctxlab.labs.lifecycle",
    "modules": "ctxlab.labs.modules",
}


def lab_module(name: str, registry: dict | None = None):
    """The lab's module (or, as ``module:attribute``, an object with NAME, CLAIMS and run)."""
    registry = registry or LABS
    if name not in registry:
        raise KeyError(f"unknown lab {name!r}: choose from {', '.join(registry)}")
    target = registry[name]
    if ":" in target:
        module, attribute = target.split(":")
        return getattr(importlib.import_module(module), attribute)
    return importlib.import_module(target)
