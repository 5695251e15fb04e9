"""ctxlab: experiments that show how CUDA contexts behave.

Importing ctxlab never imports CUDA: everything that touches the driver lives
in ``ctxlab.cuda`` and the labs' scenarios, and is imported lazily. The Python
API: ``ctxlab.run``, ``ctxlab.check``, ``ctxlab.load``, ``ctxlab.claims``
(see ``ctxlab.api``).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0"
__all__ = ["run", "check", "load", "claims", "labs", "__version__"]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def __getattr__(name: str) -> Any:
    # The API loads on first use, so ``import ctxlab`` and ``ctxlab --help`` stay light.
    if name in __all__:
        from ctxlab import api

        return getattr(api, name)
    raise AttributeError(f"module 'ctxlab' has no attribute {name!r}")
