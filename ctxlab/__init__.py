"""ctxlab: experiments that show how CUDA contexts behave.

Importing ctxlab never imports CUDA: everything that touches the driver lives
in ``ctxlab.cuda`` and the labs' scenarios, and is imported lazily. The Python
API: ``ctxlab.run``, ``ctxlab.check``, ``ctxlab.load``, ``ctxlab.claims``, ``ctxlab.labs``,
``ctxlab.doctor``, ``ctxlab.merge``, and ``ctxlab.api.trace`` and ``ctxlab.api.audit`` (``ctxlab.trace`` and
``ctxlab.audit`` are the subpackages of those names: one spelling each).
"""

from __future__ import annotations

from ctxlab.version import __version__

TYPE_CHECKING = False  # typing is not imported at run time: the console command loads in as little as it can
if TYPE_CHECKING:
    import typing as _typing

__all__ = ["run", "check", "load", "claims", "labs", "doctor", "merge", "__version__"]
SUBPACKAGES = ("api", "trace", "audit")  # loaded on first use, as themselves


def __dir__() -> list[str]:
    """The public API and the subpackages already imported; not the names this module uses itself."""
    return sorted(set(__all__) | {k for k, v in globals().items() if not k.startswith("_") and k != "annotations"
                                  and getattr(v, "__name__", "").startswith("ctxlab.")})


def __getattr__(name: str) -> _typing.Any:  # noqa: F821 (imported for the type checker only)
    # The API loads on first use, so ``import ctxlab`` and ``ctxlab --help`` stay light.
    if name in SUBPACKAGES:
        import importlib

        return importlib.import_module(f"ctxlab.{name}")
    if name in __all__:
        from ctxlab import api

        return getattr(api, name)
    raise AttributeError(f"module 'ctxlab' has no attribute {name!r}")
