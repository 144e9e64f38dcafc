"""Exercise cells lose their outputs in the executed edition; every other cell keeps its own."""
import nbformat.v4 as nbf

from course_site.redaction import without_exercise_outputs


def graded_cell(source, grade_id):
    cell = nbf.new_code_cell(source, execution_count=3, outputs=[nbf.new_output("stream", text="○ 还没有作答\n")])
    cell.metadata["nbgrader"] = {"grade_id": grade_id}
    return cell


def test_answer_and_check_cells_lose_their_outputs_and_demos_keep_theirs():
    demo = nbf.new_code_cell("print(1)", execution_count=2, outputs=[nbf.new_output("stream", text="1\n")])
    notebook = nbf.new_notebook(cells=[demo, graded_cell("def f(): raise NotImplementedError", "answer-03-f"),
                                       graded_cell('check("03.f")', "check-03-f")])
    without_exercise_outputs(notebook)
    assert [cell.outputs for cell in notebook.cells[1:]] == [[], []]
    assert [cell.execution_count for cell in notebook.cells] == [2, None, None]
    assert notebook.cells[0].outputs[0].text == "1\n"
