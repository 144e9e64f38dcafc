"""Run a function on a module right after it is first imported, without importing it now.

``_autoload`` runs inside ``import torch``, where importing ``torch._inductor.config``
would add most of a second to every process that never compiles.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


class _ThenLoader(importlib.abc.Loader):
    def __init__(self, loader, then: Callable):
        self.loader = loader
        self.then = then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.then(module)


class _Watch(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, then: Callable):
        self.name = name
        self.then = then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


def after_import(name: str, then: Callable) -> None:
    """Call ``then(module)`` once ``name`` is imported: now if it already is, else right
    after its first import finishes."""
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _Watch(name, then))
