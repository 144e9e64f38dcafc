"""Exercise declarations, one module per chapter (``chNN_*.py``).

:func:`load` imports every chapter module, which registers its exercises. Chapter
modules name their reference solutions by string and never import them: the sandbox
imports a chapter module for its ``produce`` functions, and there the solutions are
hidden.
"""
import importlib
import pkgutil

from ..exercise import REGISTRY, Registry


def load() -> Registry:
    """The registry with every chapter's exercises, in chapter order."""
    for name in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch")):
        importlib.import_module(f"{__name__}.{name}")
    return REGISTRY


__all__ = ["load", "REGISTRY"]
