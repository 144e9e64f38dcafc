"""The sandbox runs only the cells the graded functions need, and falls back to every cell
when the text hid a dependency."""
import nbformat

from grader.grading.feedback import reason
from grader import chapters
from grader.grading.cell_slice import cell_names, needed_cells
from grader.grading.harness import SOLUTIONS_DIR, grade_notebook, learner_cells
from grader.grading.notebooks import ANSWER_PREFIX, grade_id, read_notebook
from grader.instructor.release import inject_solutions
from grader.sandbox.confinement import Limits
from notebook_builders import CHAPTER_03, NOTEBOOKS, answers_only

LIMITS = Limits(cell_timeout_s=60, task_timeout_s=30, protected_paths=(str(SOLUTIONS_DIR),))


def numbered(*sources):
    return list(enumerate(sources))


def test_keeps_the_defining_cells_and_what_they_read_transitively():
    cells = numbered("import torch\nimport math", "SCALE = math.pi", "def helper(x):\n    return x * SCALE",
                     "result = helper(torch.ones(2))  # a demo", "def answer(x):\n    return helper(x) + 1",
                     "while True:\n    pass")
    assert [i for i, _ in needed_cells(cells, {"answer"})] == [0, 1, 2, 4]


def test_parameters_and_locals_do_not_pull_in_cells_that_bind_the_same_name():
    cells = numbered("gm = make_graph()", "def count_ops(gm):\n    total = len(gm.graph.nodes)\n    return total")
    assert needed_cells(cells, {"count_ops"}) == [cells[1]]


def test_a_cell_that_assigns_into_a_module_the_answer_uses_is_kept():
    cells = numbered("import torch", "torch._dynamo.config.capture_scalar_outputs = True", "print('demo')",
                     "def answer(x):\n    return torch.compile(lambda t: t.item())(x)")
    assert [i for i, _ in needed_cells(cells, {"answer"})] == [0, 1, 3]


def test_cells_it_cannot_read_are_kept():
    cells = numbered("def broken(:\n    pass", "from math import *", "x = 1", "def answer():\n    return 2")
    assert [i for i, _ in needed_cells(cells, {"answer"})] == [0, 1, 3]


def test_magics_are_read_as_python():
    names = cell_names("%matplotlib inline\nimport numpy as np\n!echo hi\ndef f():\n    return np.ones(1)")
    assert {"np", "f"} <= names.binds and not names.opaque


def test_with_the_references_each_chapter_runs_its_import_cell_and_answer_cells_only():
    for path in sorted(NOTEBOOKS.glob("0[0-3]_*.ipynb")):
        filled = inject_solutions(read_notebook(path))
        kept = needed_cells(learner_cells(filled), {e.function for e in chapters.chapter(path.name[:2])})
        answers = [i for i, c in enumerate(filled.cells) if grade_id(c).startswith(ANSWER_PREFIX)]
        assert [i for i, _ in kept][1:] == answers and "import" in kept[0][1], path.name


def test_a_demo_cell_that_never_ends_is_not_run_when_grading():
    notebook = answers_only(CHAPTER_03)
    notebook.cells.insert(1, nbformat.v4.new_code_cell("import time\nwhile True:\n    time.sleep(1)"))
    exercises = [chapters.get("03.op_census")]
    graded = grade_notebook(notebook, seed=0, limits=LIMITS, include_hidden=False, exercises=exercises)
    assert graded.exercises[0].passed and graded.notes == []


def test_a_name_made_by_exec_is_found_by_running_every_cell():
    notebook = answers_only(CHAPTER_03, {"03.op_census": "def count_ops(gm):\n    return census(gm)\n"})
    reference = "from collections import Counter\n" + (
        "def census(gm):\n    counts = Counter()\n    for node in gm.graph.nodes:\n"
        "        if node.op == 'call_module':\n            counts[type(gm.get_submodule(node.target)).__name__] += 1\n"
        "        elif node.op in ('call_function', 'call_method'):\n"
        "            counts[getattr(node.target, '__name__', node.target)] += 1\n    return dict(counts)\n")
    notebook.cells.insert(1, nbformat.v4.new_code_cell(f"exec({reference!r})"))
    exercises = [chapters.get("03.op_census")]
    graded = grade_notebook(notebook, seed=0, limits=LIMITS, include_hidden=False, exercises=exercises)
    assert graded.exercises[0].passed, reason(graded.exercises[0])
