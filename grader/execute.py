"""Execute a filled-in notebook headless and collect one result per graded exercise."""
from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path

import nbclient
import nbformat

from .check import MODE_VARIABLE, RESULTS_VARIABLE, SEED_VARIABLE
from .exercise import REGISTRY, Verdict
from .notebooks import check_cells, read_notebook
from .results import CaseResult, ExerciseResult

CELL_TIMEOUT_S = 300


def _cell_error(cell) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output.get('ename')}: {output.get('evalue', '')}".strip()
    return None


def _read_results(path: Path) -> dict[str, dict]:
    records = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            records[record["exercise"]] = record
    return records


def _result_from(record: dict | None, exercise_id: str, cell_error: str | None) -> ExerciseResult:
    exercise = REGISTRY.get(exercise_id)
    result = ExerciseResult(exercise.id, exercise.title, exercise.points)
    if record is None:
        result.error = f"检查单元格没有运行完成（{cell_error or '单元格未执行'}）。"
        return result
    for case in record["cases"]:
        verdict = Verdict(case["passed"], case.get("message", ""), case.get("expected"), case.get("got"))
        result.cases.append(CaseResult(case["case"], case["hidden"], verdict))
    if record["reason"] and record["passed"] is False and not result.cases:
        result.error = record["reason"]
    if record["passed"] and cell_error is not None:
        result.error = f"检查单元格报错：{cell_error}"
    return result


def execute_notebook(path, *, seed: int | None = None, timeout: int = CELL_TIMEOUT_S) -> list[ExerciseResult]:
    """Run every cell of the notebook at ``path`` in a fresh kernel, in an empty scratch
    folder, with hidden cases on; return the results in notebook order."""
    notebook = read_notebook(path)
    checks = check_cells(notebook)
    with tempfile.TemporaryDirectory(prefix="grader-") as scratch:
        workdir = Path(scratch) / "work"
        workdir.mkdir()
        results_file = Path(scratch) / "results.jsonl"
        env = {**os.environ, MODE_VARIABLE: "grade", RESULTS_VARIABLE: str(results_file),
               SEED_VARIABLE: str(seed if seed is not None else random.randrange(2**31))}
        client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                         allow_errors=True, resources={"metadata": {"path": str(workdir)}})
        try:
            client.execute(env=env)
        except nbclient.exceptions.CellTimeoutError:
            pass  # cells after the timeout are reported as not run
        records = _read_results(results_file)
    return [_result_from(records.get(identifier), identifier, _cell_error(cell))
            for identifier, cell in checks.items()]
