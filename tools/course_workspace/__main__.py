"""``python -m course_workspace COURSE_NOTEBOOKS WORKSPACE``: sync the workspace, tell the learner."""
from __future__ import annotations

import argparse
from pathlib import Path

from .messages import shown_path, terminal_report
from .sync import sync_workspace


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_workspace", description=__doc__)
    parser.add_argument("course_notebooks", type=Path, help="the course's chapter notebooks (read only)")
    parser.add_argument("workspace", type=Path, help="the learner's folder (created if missing)")
    args = parser.parse_args(argv)
    placements = sync_workspace(args.course_notebooks, args.workspace)
    report = terminal_report(placements, folder=shown_path(args.workspace, Path.cwd()))
    if report:
        print(report, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
