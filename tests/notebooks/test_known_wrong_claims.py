"""Claims the course once made and found wrong (issue 16) must not come back: no notebook cell
and no learner-facing string in the grader may contain them."""
import ast
from pathlib import Path

import pytest

from grader.grading.notebooks import read_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
GRADER_FILES = sorted((ROOT / "grader").rglob("*.py"))

KNOWN_WRONG = {
    # TorchScript's deprecation has no single version: some torch.jit docstrings say `deprecated:: 2.5`,
    # the docs page marks it from 2.9, the 2.11 release blog announces it, and the run-time warnings name
    # none. A sentence dating it "from 2.5" presents one source as the answer; chapter 02 names each.
    "自 2.5 起弃用": "one source dates TorchScript's deprecation 2.5; name the source",
    "2.5 起弃用": "one source dates TorchScript's deprecation 2.5; name the source",
    "2.5 开始弃用": "one source dates TorchScript's deprecation 2.5; name the source",
    "2.5 起已弃用": "one source dates TorchScript's deprecation 2.5; name the source",
    "PyTorch 2.5 起": "one source dates TorchScript's deprecation 2.5; name the source",
    # torch.export defaults to strict=False: Python-level tracing with fake tensors, not Dynamo
    "用同一套捕获技术": "torch.export does not use Dynamo unless strict=True",
    "用同一套捕获导出": "torch.export does not use Dynamo unless strict=True",
    "与 Dynamo 相同的捕获技术": "torch.export does not use Dynamo unless strict=True",
    # GPU numbers: state the measured fraction of the copy roofline, not a guess
    "约 4 倍": "the recorded speed-up is in assets/gpu, measured with its copy roofline",
    "极限附近": "compare with the copy roofline measured in the same run",
    # cross-references that pointed at the wrong place
    "第 05–07 章": "name the chapters one by one",
    "第 03 章的练习": "the Conv+BN folding is not a chapter 03 exercise",
    # numbers written in prose and never measured
    "约 10 秒": "cold compile time is measured in chapter 01, section 4",
    "8–14 秒": "cold compile time is measured in chapter 01, section 4",
    "每个算子几微秒": "per-op overhead is measured in chapter 01, section 1",
    "每次几微秒": "launch overhead is not measured there",
    "40–70 µs": "the guard overhead is measured in chapter 00, section 3",
    "< 100 µs": "the decision tree uses measured quantities, not a fixed threshold",
    "不到 1 分钟": "the decision tree uses measured quantities, not a fixed threshold",
    "0.1–0.4": "the speed check's ratios are printed by benchmarks/timing_false_failures.py",
    # issue 24's review
    "TPU 的唯一路径": "torch.compile's openxla backend also reaches TPUs through torch_xla",
    "约 100 µs": "the recorded cost of a synchronize per call is +12 to +35 µs (assets/gpu)",
    "5 个算子": "make_fx counts the pointwise chain's ops (6)",
    "两千多个算子": "say which count (dispatcher overloads, names, core-tagged): chapter 06 prints them",
    "默认会打印警告后跳过这个帧": "suppress_errors is False by default: a failing backend raises BackendCompilerFailed",
}


def notebook_texts():
    for path in NOTEBOOKS:
        for index, cell in enumerate(read_notebook(path).cells):
            yield f"{path.name} cell {index}", cell.source


def grader_strings():
    for path in GRADER_FILES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node.value


@pytest.mark.parametrize("phrase", sorted(KNOWN_WRONG))
def test_no_notebook_repeats_a_known_wrong_claim(phrase):
    found = [where for where, text in notebook_texts() if phrase in text]
    assert found == [], f"{phrase!r} ({KNOWN_WRONG[phrase]}) in {found}"


@pytest.mark.parametrize("phrase", sorted(KNOWN_WRONG))
def test_no_grader_message_repeats_a_known_wrong_claim(phrase):
    found = [where for where, text in grader_strings() if phrase in text]
    assert found == [], f"{phrase!r} ({KNOWN_WRONG[phrase]}) in {found}"
