"""``python -m course_site [--output DIR]``: build the executed edition, print where its index.html is."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .build import DEFAULT_OUTPUT, build_site
from .errors import SiteBuildError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_site", description=__doc__)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help=f"the site's folder, replaced by the build (default {DEFAULT_OUTPUT})")
    parser.add_argument("--workers", type=int, default=2, help="notebooks run at the same time (default 2)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    try:
        index = build_site(args.output.resolve(), workers=args.workers)
    except SiteBuildError as error:
        print(f"error: the site was not built: {error}", file=sys.stderr)
        return 1
    print(f"site built: {index}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
