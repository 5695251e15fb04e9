"""The labs: one module each, declaring ``LAB`` (a ``ctxlab.lab.Lab``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the registry's names are read by the CLI at start-up: the lab model loads with a lab
    from ctxlab.lab import Lab

LABS = {
    "migrate": "ctxlab.labs.migrate",
    "refcount": "ctxlab.labs.refcount",
    "lifecycle": "ctxlab.labs.lifecycle",
    "modules": "ctxlab.labs.modules",
    "interop": "ctxlab.labs.interop",
    "peer": "ctxlab.labs.peer",
}


class UnknownLab(KeyError):
    """A lab name that is not in the registry."""

    def __str__(self) -> str:
        return str(self.args[0])


def get_lab(name: str, registry: dict[str, str] | None = None) -> Lab:
    """The lab called ``name``: ``registry`` maps names to a module holding ``LAB`` or to ``module:attribute``."""
    registry = registry or LABS
    if name not in registry:
        raise UnknownLab(f"unknown lab {name!r}: choose from {', '.join(registry)}")
    from ctxlab.lab import Lab

    module, _, attribute = registry[name].partition(":")
    lab = getattr(importlib.import_module(module), attribute or "LAB")
    if not isinstance(lab, Lab):
        raise TypeError(f"{registry[name]} is not a Lab")
    return lab
