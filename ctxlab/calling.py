"""``ctxlab.trace(...)`` and ``ctxlab.audit(...)``: the two subpackages that share their names with the API's
functions are callable (a module's class may be a subclass of ModuleType), so that both spellings work:
``ctxlab.trace.calls(events)`` and ``ctxlab.trace(argv=["prog.py"])``."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable


def make_callable(module_name: str, function: Callable[..., object]) -> None:
    """Calling the module ``module_name`` calls ``function``."""

    class CallableModule(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return function(*args, **kwargs)

    CallableModule.__call__.__doc__ = function.__doc__
    sys.modules[module_name].__class__ = CallableModule
