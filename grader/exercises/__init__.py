"""Exercise declarations, one module per chapter (``chNN_*.py``); importing this package
registers them all, in chapter order."""
import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch")):
    importlib.import_module(f"{__name__}.{_module}")
