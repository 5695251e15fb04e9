"""Run a function on a module once it is imported: an import hook on ``sys.meta_path`` that finds nothing
itself and, when the real finders load one of the watched modules, calls ``on_module`` with it after its code
ran. The audit's library hooks (``exchange``, ``allocators``) wrap libraries this way, whenever the program
imports them."""

from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable, Collection


class ImportWatch(importlib.abc.MetaPathFinder):
    """Calls ``on_module(module)`` for each of ``names`` imported from now on (and, at ``install``, for those
    already imported)."""

    def __init__(self, names: Collection[str], on_module: Callable[[object], None]) -> None:
        self.names = frozenset(names)
        self.on_module = on_module
        self._busy = threading.local()

    def install(self) -> None:
        """The modules already imported now; the others when they are."""
        for name in sorted(self.names):
            if name in sys.modules:
                self.on_module(sys.modules[name])
        sys.meta_path.insert(0, self)

    def close(self) -> None:
        """Stop watching imports."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname, path, target=None):
        """The real spec of a watched module, its loader wrapped to call ``on_module`` once executed."""
        if fullname not in self.names or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        spec = None
        try:  # the finders after this one, in the import system's order (numba-cuda redirects numba.cuda)
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader, on_module = spec.loader, self.on_module

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                on_module(module)

        spec.loader = Loader()
        return spec
