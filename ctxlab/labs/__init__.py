"""The labs: one module each, with NAME, CLAIMS and run(options) -> LabResult."""

from __future__ import annotations

import importlib

LABS = {
    "migrate": "ctxlab.labs.migrate",
    "refcount": "ctxlab.labs.refcount",
    "lifecycle": "ctxlab.labs.lifecycle",
    "modules": "ctxlab.labs.modules",
}


def lab_module(name: str):
    if name not in LABS:
        raise KeyError(f"unknown lab {name!r}: choose from {', '.join(LABS)}")
    return importlib.import_module(LABS[name])
