"""How the checks report what is not an answer: a stub, an exception, a wrong type, hidden cases.

(Which answers are right and wrong: ``test_verdicts.py``.)"""
import inspect
import linecache

import nbclient
import nbformat

import solutions.ch03_fx
from grader.grading.feedback import reason
from grader.grading.records import exercise_record
from grader import chapters
from grader.grading.selfstudy import run_in_kernel


def test_stub_that_raises_not_implemented_gets_a_clear_message():
    def stub(gm):
        raise NotImplementedError
    result = run_in_kernel(chapters.get("03.op_census"), stub, include_hidden=False, seed=0)
    assert result.error and "还没有实现" in result.error


def test_exception_in_learner_code_is_reported_per_case():
    def broken(gm):
        return 1 / 0
    result = run_in_kernel(chapters.get("03.remove_dropout"), broken, include_hidden=False, seed=0)
    assert "ZeroDivisionError" in reason(result)


def test_wrong_return_type_is_explained():
    result = run_in_kernel(chapters.get("03.remove_dropout"), lambda gm: None, include_hidden=False, seed=0)
    assert "GraphModule" in reason(result) and "NoneType" in reason(result)


def test_hidden_case_feedback_never_shows_inputs_or_values():
    result = run_in_kernel(chapters.get("03.fusion_groups"), lambda gm: [], include_hidden=True, seed=0)
    hidden = [c for c in exercise_record(result)["cases"] if c["hidden"]]
    assert hidden and all(set(c) == {"case", "hidden", "passed", "message"} for c in hidden)


def test_a_pass_that_edits_the_graph_without_recompiling_is_told_so():
    def remove_dropout(gm):
        for node in list(gm.graph.nodes):
            if node.op == "call_module" and "dropout" in node.target:
                node.replace_all_uses_with(node.args[0])
                gm.graph.erase_node(node)
        return gm  # no gm.recompile(): calling gm still runs the dropout
    result = run_in_kernel(chapters.get("03.remove_dropout"), remove_dropout, include_hidden=False, seed=0)
    assert result.points == 0 and "recompile()" in reason(result)


def test_check_cells_show_every_status_as_ordinary_output_not_as_an_error():
    """In a kernel: a label and text (display_data), never stderr, whatever the status."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in (
        "from collections import Counter\nimport torch.fx as fx\nfrom grader import check",
        'check("03.op_census")',                                     # unanswered
        "def count_ops(gm):\n    return {}\ncheck(\"03.op_census\")",  # wrong
        inspect.getsource(solutions.ch03_fx.count_ops) + 'check("03.op_census")')]
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    for cell, (mark, word) in zip(notebook.cells[1:], [("○", "还没有作答"), ("×", "未通过"), ("√", "通过")]):
        [output] = cell.outputs
        assert output.output_type == "display_data", output
        assert output.data["text/plain"].startswith(f"{mark} {word} 03.op_census")
        assert f">{word}</span>" in output.data["text/html"] and "grader-status" in output.data["text/html"]


LONG_ERROR = """def count_ops(gm):
    raise RuntimeError("The size of tensor a (4) must match the size of tensor b (5). " + "Details follow. " * 60)
"""


def test_an_exception_names_the_learners_line_first_and_a_long_message_is_cut_after_a_sentence():
    namespace = {}
    linecache.cache["<cell-7>"] = (len(LONG_ERROR), None, LONG_ERROR.splitlines(keepends=True), "<cell-7>")
    exec(compile(LONG_ERROR, "<cell-7>", "exec"), namespace)
    result = run_in_kernel(chapters.get("03.op_census"), namespace["count_ops"], include_hidden=False, seed=0)
    detail = reason(result).split("你的函数抛出了异常 ", 1)[1]
    assert detail.startswith("RuntimeError（第 2 行：raise RuntimeError(")
    assert detail.endswith("Details follow. …（后面还有，已省略）")
