"""The lab registry: one line per lab, its name, the module declaring its ``LAB`` (a ``ctxlab.lab.Lab``) and the
one line ``ctxlab --help`` shows for its command.

The CLI reads this at start-up to list the lab commands: it must import no lab (and not the lab model). Everything
else a lab has (its question, its command's help, options, claims, scenarios) is in its package, loaded when the
lab is first needed. docs/adding-a-lab.md says what adding one takes.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the lab model loads with a lab
    from ctxlab.lab import Lab


class LabEntry(str):
    """A lab in the registry: the module that holds its ``LAB`` (or names it, ``module:attribute``), as a plain
    entry is, with ``summary``, its command's line in ``ctxlab --help`` (one sentence saying what it does).

    A string, so that a registry of plain module strings (the test suite's stand-in labs, listed with a generic
    line) is a registry too."""

    summary: str

    def __new__(cls, module: str, summary: str) -> LabEntry:
        """The entry for the lab that ``module`` declares, listed with ``summary``."""
        entry = super().__new__(cls, module)
        entry.summary = summary
        return entry

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # both, for pickle and copy
        return str(self), self.summary

    @property
    def module(self) -> str:
        """The module (or ``module:attribute``) that declares the lab."""
        return str(self)


# Typed as the plain registries it stands beside (a LabEntry is a str): whatever takes one takes it.
LABS: dict[str, str] = {
    "migrate": LabEntry("ctxlab.labs.migrate", "Hand a context between host threads; check that state moves with it."),
    "refcount": LabEntry("ctxlab.labs.refcount", "Show what keeps a context alive and what release and reset "
                                                 "destroy."),
    "lifecycle": LabEntry("ctxlab.labs.lifecycle", "Show when and by which calls the runtime creates its context, "
                                                   "and how to get its handle."),
    "modules": LabEntry("ctxlab.labs.modules", "Show how and when modules are loaded into a context."),
    "interop": LabEntry("ctxlab.labs.interop", "Show whether CuPy, PyTorch, JAX, Numba and cuda.core share one "
                                               "context, and what survives fork."),
    "peer": LabEntry("ctxlab.labs.peer", "Show whether peer access between two GPUs belongs to a context and "
                                         "follows it to another thread."),
}


class UnknownLab(KeyError):
    """A lab name that is not in the registry."""

    def __str__(self) -> str:
        return str(self.args[0])


def summary_of(name: str, registry: Mapping[str, str] | None = None) -> str:
    """Lab ``name``'s line in the command list: its entry's summary, or a generic one for a plain string entry."""
    registry = registry or LABS
    found = registry.get(name, name)
    return found.summary if isinstance(found, LabEntry) else f"Run the {name} lab and give a verdict per claim."


def get_lab(name: str, registry: Mapping[str, str] | None = None) -> Lab:
    """The lab called ``name``: ``registry`` (default ``LABS``) maps names to a module holding ``LAB`` or to
    ``module:attribute``."""
    registry = registry or LABS
    if name not in registry:
        raise UnknownLab(f"unknown lab {name!r}: choose from {', '.join(registry)}")
    from ctxlab.lab import Lab

    module, _, attribute = registry[name].partition(":")
    lab = getattr(importlib.import_module(module), attribute or "LAB")
    if not isinstance(lab, Lab):
        raise TypeError(f"{registry[name]} is not a Lab")
    return lab
