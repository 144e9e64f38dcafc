"""What a sync did to one chapter notebook."""
from __future__ import annotations

import enum
from dataclasses import dataclass


class PlacementKind(enum.Enum):
    COPIED = "copied"        # the chapter was not in the workspace
    UPDATED = "updated"      # the learner's copy was untouched, so it was replaced
    BESIDE = "beside"        # the learner changed their copy; the new version sits beside it


@dataclass(frozen=True)
class Placement:
    notebook: str   # the course notebook's name, e.g. "03_fx.ipynb"
    written: str    # the workspace file that received it, e.g. "03_fx.新版.ipynb"
    kind: PlacementKind
