"""Attack notebooks: each tries to win points it has not earned, in one of the ways listed
in "What 'cannot be fooled' means" (shared/notes/grading-lessons.md). Every one must end
in 0 points for the attacked exercise, with a reason, while the others are graded normally.
"""
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from grader.grading.feedback import reason
from grader import chapters
from grader.grading.harness import SOLUTIONS_DIR, grade_file
from grader.sandbox.confinement import Limits
from grader.sandbox.driver import choose_isolation
from notebook_builders import write_answers_only

# The default memory cap (6 GiB of address space): a CUDA build of torch, what pip installs on
# Linux off this machine, maps 3.4 GiB at import, so a 3 GiB cap failed every analysis there.
FAST = Limits(cell_timeout_s=10, task_timeout_s=6, protected_paths=(str(SOLUTIONS_DIR),))
GRADER_FILE = Path(__file__).resolve().parents[2] / "grader" / "chapters" / "ch03_fx.py"

# A wrong answer the attacks try to get accepted: it leaves every dropout in place.
WRONG_REMOVE_DROPOUT = "def remove_dropout(gm):\n    return gm\n"


# Where the pickled payload would leave its mark if it ever ran in the grader: a name of this
# run's own (a fixed path could be another user's leftover on a shared machine).
PAYLOAD_MARKER = Path(tempfile.gettempdir()) / f"grader-attack-payload-ran-{uuid.uuid4().hex}"


def code(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


ATTACKS = {
    "patch_clocks_helpers_and_torch": ("03.remove_dropout", {"03.remove_dropout": WRONG_REMOVE_DROPOUT + code("""
        import time, torch, grader.authoring.artifacts, grader.authoring.exercise
        time.perf_counter = lambda: 0.0
        time.monotonic = lambda: 0.0
        torch.allclose = lambda *a, **k: True
        torch.Tensor.__eq__ = lambda self, other: True
        grader.authoring.artifacts.compare_outputs = lambda *a, **k: grader.authoring.exercise.PASS
        grader.authoring.exercise.Verdict.__init__.__defaults__ = (True,)
        torch.set_default_dtype(torch.float64)
    """)}, (), None),
    "print_fake_success": ("03.remove_dropout", {"03.remove_dropout": WRONG_REMOVE_DROPOUT + code("""
        print("✅ 03.remove_dropout 推理时删除 Dropout 通过（2/2 分）")
    """)}, (), None),
    "system_exit_in_function": ("03.op_census", {"03.op_census": code("""
        def count_ops(gm):
            raise SystemExit(0)
    """)}, (), None),
    "keyboard_interrupt_at_top_level": ("03.op_census", {"03.op_census": code("""
        def count_ops(gm):
            return {}
        raise KeyboardInterrupt
    """)}, (), None),
    "endless_loop_swallowing_interrupts": ("03.fold_conv_bn", {"03.fold_conv_bn": code("""
        def fold_conv_bn(gm):
            while True:
                try:
                    pass
                except BaseException:
                    pass
    """)}, (), None),
    "endless_loop_in_a_cell": ("03.fusion_groups", {"03.fusion_groups": code("""
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        def find_fusion_groups(gm):
            return []
        while True:
            pass
    """)}, (), None),
    "os_exit": ("03.relu_to_gelu", {"03.relu_to_gelu": code("""
        import os
        def relu_to_gelu(gm):
            os._exit(0)
    """)}, (), None),
    "exhaust_memory": ("03.op_census", {"03.op_census": code("""
        def count_ops(gm):
            hoard = []
            while True:
                hoard.append(bytearray(2**28))
    """)}, (), None),
    "exhaust_processes": ("03.op_census", {"03.op_census": code("""
        import subprocess, sys
        def count_ops(gm):
            children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in range(500)]
            return {"children": len(children)}
    """)}, (), None),
    "daemon_that_leaves_the_process_group": ("03.op_census", {"03.op_census": code("""
        import os, signal, time
        def count_ops(gm):
            if os.fork() == 0:  # a daemon that outlives the attempt and kills whatever shares its uid
                os.setsid()
                time.sleep(0.5)
                end = time.time() + 30
                while time.time() < end:
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except OSError:
                        pass
                    time.sleep(0.01)
                os._exit(0)
            return {}
    """)}, (), None),
    "read_solutions_and_seed": ("03.op_census", {"03.op_census": code(f"""
        import importlib, pathlib
        def count_ops(gm):
            try:
                return importlib.import_module("solutions.ch03_fx").count_ops(gm)
            except Exception:
                source = pathlib.Path({str(SOLUTIONS_DIR / "ch03_fx.py")!r}).read_text()
                namespace = {{}}
                exec(source, namespace)
                return namespace["count_ops"](gm)
    """)}, (), None),
    "write_into_grader_files": ("03.op_census", {"03.op_census": code(f"""
        import pathlib
        def count_ops(gm):
            pathlib.Path({str(GRADER_FILE)!r}).write_text("EXERCISES = None")
            return {{}}
    """)}, (), None),
    "lying_return_values": ("03.op_census", {"03.op_census": code("""
        class AlwaysEqual(dict):
            def __eq__(self, other):
                return True
        def count_ops(gm):
            return AlwaysEqual()
    """), "03.fusion_groups": code("""
        import torch
        class Liar(str):
            def __eq__(self, other):
                return True
            __hash__ = str.__hash__
        def find_fusion_groups(gm):
            return [[Liar("a"), Liar("b")]]
    """)}, (), None),
    "pickle_payload_in_artifact_files": ("03.op_census", {"03.op_census": code("""
        import os, pathlib, pickle
        class Payload:
            def __reduce__(self):
                return (os.system, ("touch PAYLOAD_MARKER",))
        def count_ops(gm):
            for path in pathlib.Path("..").glob("task-*.pt"):
                pass
            for index in range(40):
                pathlib.Path(f"../task-{index}.pt").write_bytes(pickle.dumps({"artifact": Payload()}))
            os._exit(0)
    """).replace("PAYLOAD_MARKER", str(PAYLOAD_MARKER)), "03.relu_to_gelu": code("""
        import torch
        class Shadow(torch.Tensor):
            pass
        def relu_to_gelu(gm):
            return {"graph": Shadow(torch.ones(1))}
    """)}, (), None),
    "graph_that_smuggles_code": ("03.remove_dropout", {"03.remove_dropout": code("""
        import os
        def remove_dropout(gm):
            for node in gm.graph.nodes:
                if node.op == "output":
                    with gm.graph.inserting_before(node):
                        gm.graph.call_function(os.system, ("echo pwned",))
            gm.recompile()
            return gm
    """)}, (), None),
}


def edit_locked_cells(notebook):
    """Rewrite one check cell to print success and claim 100 points, delete another,
    and turn a third into markdown."""
    checks = [c for c in notebook.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    checks[2].source = 'print("✅ 03.remove_dropout 通过（100/100 分）")'
    checks[2].metadata["nbgrader"]["points"] = 100
    notebook.cells.remove(checks[0])
    checks[1].cell_type = "markdown"
    checks[1].pop("outputs", None)
    checks[1].pop("execution_count", None)


ATTACKS["edit_delete_retype_locked_cells"] = (
    "03.remove_dropout", {"03.remove_dropout": WRONG_REMOVE_DROPOUT}, (), edit_locked_cells)


# Attacks that only bubblewrap's view or root's throw-away uid can contain. With rlimits only (an
# ordinary user without bubblewrap; the README names that level), learner code runs as the
# grader's uid: it can read what the grader reads, write the course's own files, and signal
# the grader's processes. Run there, these attacks would succeed on the checkout itself (a
# rewritten ch03_fx.py failed every later chapter 03 test) or kill the test run.
NEEDS_ISOLATION = {
    "daemon_that_leaves_the_process_group": "a daemon of the learner's can signal the grader",
    "read_solutions_and_seed": "learner code can read solutions/",
    "write_into_grader_files": "learner code can write the course's files",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_scores_zero_on_the_attacked_exercise_only(name, tmp_path):
    isolation = choose_isolation()
    if name in NEEDS_ISOLATION and not (isolation.allowlist or isolation.separate_uid):
        pytest.skip(f"{isolation.description}: {NEEDS_ISOLATION[name]}")
    attacked, answers, extra, edit = ATTACKS[name]
    grader_source = GRADER_FILE.read_bytes()
    path = write_answers_only(tmp_path / f"{name}.ipynb", answers, extra, edit)
    submission = grade_file(path, seed=11, limits=FAST)
    by_id = {r.exercise_id: r for r in submission.exercises}
    chapter = chapters.chapter("03")
    assert len(by_id) == len(chapter) and submission.max_points == sum(e.points for e in chapter)
    for exercise_id, result in by_id.items():
        if exercise_id == attacked or exercise_id in answers:
            assert result.points == 0 and reason(result), (exercise_id, reason(result))
        else:
            assert result.passed, (exercise_id, reason(result))
    assert GRADER_FILE.read_bytes() == grader_source
    assert not PAYLOAD_MARKER.exists()
