"""The learner's own copies of the chapter notebooks, kept apart from the git checkout.

Learners write their answers into a git-ignored workspace, so ``git pull`` never conflicts
with their work, and course updates reach them without overwriting anything they changed.
"""
from .placements import Placement, PlacementKind
from .sync import sync_workspace

__all__ = ["Placement", "PlacementKind", "sync_workspace"]
