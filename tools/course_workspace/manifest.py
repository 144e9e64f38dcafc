"""The workspace's memory of what the course wrote into it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST_NAME = ".course-manifest.json"


@dataclass
class Manifest:
    """``written``: digest of each workspace file as the course last wrote it, so a file whose
    digest differs now was changed by the learner. ``delivered``: digest of the course version
    last placed for each chapter notebook, so a version is offered once, not on every start."""

    written: dict[str, str] = field(default_factory=dict)
    delivered: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, workspace: Path) -> "Manifest":
        """A missing or damaged manifest reads as empty: every file already in the workspace
        then counts as the learner's, which is the safe side."""
        try:
            data = json.loads((workspace / MANIFEST_NAME).read_text(encoding="utf-8"))
            return cls(written=dict(data["written"]), delivered=dict(data["delivered"]))
        except (OSError, ValueError, KeyError, TypeError):
            return cls()

    def save(self, workspace: Path) -> None:
        data = {"written": self.written, "delivered": self.delivered}
        text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True)
        (workspace / MANIFEST_NAME).write_text(text + "\n", encoding="utf-8")
