"""What a learner's session must leave untouched in the git checkout."""
import subprocess

from course_server import REPO


def checkout_state() -> tuple[str, dict[str, bytes]]:
    """``git status`` and the course notebooks' bytes."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    notebooks = {p.name: p.read_bytes() for p in sorted((REPO / "notebooks").glob("*.ipynb"))}
    return status, notebooks
