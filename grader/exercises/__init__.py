"""Exercise declarations, one module per chapter; importing this package registers them."""
from . import ch03_fx  # noqa: F401  (registers chapter 03)
