"""Every fact test names a sentence that is really there: its phrase occurs in its place."""
import ast
from pathlib import Path

import pytest

from grader.grading.notebooks import read_notebook

ROOT = Path(__file__).resolve().parents[2]
FACT_FILES = sorted(Path(__file__).parent.glob("test_*facts.py"))


def backed_phrases() -> list[tuple[str, str, str]]:
    """(fact file, place, phrase) of every ``@backs(place, phrase)`` in the fact files."""
    found = []
    for path in FACT_FILES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "backs":
                place, phrase = (argument.value for argument in node.args)
                found.append((path.name, place, phrase))
    return found


def text_of(place: str) -> str:
    path = ROOT / place
    if path.suffix == ".ipynb":
        return "\n".join(cell.source for cell in read_notebook(path).cells)
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("fact_file, place, phrase", backed_phrases())
def test_the_sentence_a_fact_backs_is_where_its_test_says(fact_file, place, phrase):
    assert phrase in text_of(place), f"{fact_file}: 「{phrase}」 is no longer in {place}"


def test_every_chapter_has_its_facts_pinned():
    places = {place for _, place, _ in backed_phrases()}
    assert {p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb")} <= places
