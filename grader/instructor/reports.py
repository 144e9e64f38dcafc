"""Grading results in the formats other tools read: JUnit XML and Gradescope's results.json.

Both take *records*: the JSON of one graded submission (``SubmissionResult.to_json()``
plus ``student``/``assignment``/``status``), as written under ``harness/``.
"""
from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

from .. import chapters
from ..grading.feedback import STATUSES, format_result, public_case_lines
from ..grading.records import results_from_records
from ..grading.results import ExerciseResult


def write_junit(records: list[dict], path) -> Path:
    """One ``<testsuite>`` per submission, one ``<testcase>`` per exercise."""
    suites = ElementTree.Element("testsuites", name="pytorch-compiler-course")
    for record in records:
        name = f"{record['assignment']}/{record['student']}"
        exercises = record.get("exercises", [])
        failures = sum(not e["passed"] for e in exercises)
        suite = ElementTree.SubElement(suites, "testsuite", name=name, tests=str(max(len(exercises), 1)),
                                       failures=str(failures), errors="0" if exercises else "1")
        if record.get("status") != "graded":
            case = ElementTree.SubElement(suite, "testcase", classname=name, name="notebook")
            ElementTree.SubElement(case, "error", message=record.get("reason", record.get("status", "")))
        for exercise in exercises:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name=exercise["exercise"])
            if not exercise["passed"]:
                ElementTree.SubElement(case, "failure", message=exercise["reason"]).text = exercise["reason"]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
    return path


def _test(name: str, score: float, max_score: float, passed: bool, output: str, visibility: str) -> dict:
    return {"name": name, "score": score, "max_score": max_score, "status": "passed" if passed else "failed",
            "output": output, "visibility": visibility}


def _exercise_tests(result: ExerciseResult) -> list[dict]:
    """An exercise without hidden cases is one visible test. Otherwise its public cases are
    a visible test worth no points, and its points (which the hidden cases decide) a test
    that Gradescope shows only once the instructor publishes the grades."""
    exercise = chapters.get(result.exercise_id)
    name = f"{exercise.id} {exercise.title}"
    public = [c for c in result.cases if not c.hidden]
    if len(public) == len(result.cases):
        return [_test(name, result.points, result.max_points, result.passed, format_result(result, exercise),
                      "visible")]
    tests = []
    if public:
        ok = all(c.verdict.ok for c in public)
        mark = STATUSES["passed" if ok else "failed"][0]
        head = f"{mark} 公开用例{'全部通过' if ok else '未全部通过'}；得分含隐藏用例，成绩公布后可见。"
        tests.append(_test(f"{name}（公开用例）", 0, 0, ok, "\n".join([head, *public_case_lines(public)]), "visible"))
    tests.append(_test(f"{name}（得分，含隐藏用例）", result.points, result.max_points, result.passed,
                       format_result(result, exercise), "after_published"))
    return tests


def _submission_lines(record: dict) -> list[str]:
    """The top-level message: why nothing was graded, the notes, the isolation level."""
    lines = []
    if record.get("status") == "invalid":
        lines.append(f"这份笔记本无法评分，请在 Jupyter 中重新保存后再提交：{record.get('reason', '')}")
    elif record.get("status") == "error":
        lines.append(f"评分器出错（不是你的提交的问题），请联系教师：{record.get('reason', '')}")
    lines += record.get("notes", [])
    if record.get("isolation"):
        lines.append(f"评分隔离（isolation）：{record['isolation']}")
    return lines


def gradescope_results(record: dict) -> dict:
    """Gradescope autograder ``results.json`` for one submission
    (https://gradescope-autograders.readthedocs.io/en/latest/specs/)."""
    tests = [test for result in results_from_records(record.get("exercises", [])).values()
             for test in _exercise_tests(result)]
    results = {"score": record.get("points", 0), "tests": tests, "stdout_visibility": "hidden"}
    if lines := _submission_lines(record):
        results["output"] = "\n".join(lines)
    return results


def write_results_json(results: dict, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


def write_gradescope(record: dict, path) -> Path:
    return write_results_json(gradescope_results(record), path)
