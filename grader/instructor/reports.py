"""Grading results in the formats other tools read: JUnit XML and Gradescope's results.json.

Both take *records*: the JSON of one graded submission (``SubmissionResult.to_json()``
plus ``student``/``assignment``/``status``), as written under ``harness/``.
"""
from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree


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


def gradescope_results(record: dict) -> dict:
    """Gradescope autograder ``results.json`` for one submission."""
    tests = [{
        "name": f"{e['exercise']} {e['title']}",
        "score": e["points"],
        "max_score": e["max_points"],
        "output": "通过" if e["passed"] else e["reason"],
        "visibility": "visible",
    } for e in record.get("exercises", [])]
    results = {"score": record.get("points", 0), "tests": tests, "stdout_visibility": "hidden"}
    if record.get("status") != "graded":
        results["output"] = record.get("reason", "")
    elif record.get("notes"):
        results["output"] = "\n".join(record["notes"])
    return results


def write_gradescope(record: dict, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(gradescope_results(record), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path
