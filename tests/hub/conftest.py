"""The JupyterHub test's own helpers (hub_browser) are imported from this folder."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
