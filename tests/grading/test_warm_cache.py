"""Sandboxes start warm: what the reference run compiled with Inductor (collected once, at
release) is loaded from a cache instead of compiled again, and nothing a submission
writes into its copy reaches the shared cache or the next submission; loading from it runs
no compiler."""
import json
from dataclasses import replace

from grader import chapters
from grader.sandbox.confinement import Limits
from grader.sandbox.driver import Task, run_in_sandbox

PROBE = """
import json, os, torch
from torch._dynamo.utils import counters
from torch._inductor.codecache import _HEADER_DIR
torch.compile(lambda t: (t * 2).sin() + 1)(torch.ones(8))
open(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "planted-{run}"), "w").write("x")
print("PROBE " + json.dumps({{**counters["inductor"], "precompiled_header": os.path.isdir(_HEADER_DIR)}}))
def count_ops(gm):
    return {{}}
"""


def compile_in_sandbox(run: str, limits: Limits) -> dict:
    """Inductor's cache counters after the sandbox compiled one small function."""
    exercise = chapters.get("03.op_census")
    task = Task(0, exercise.function, exercise.produce_name, exercise.public_cases()[0].build())
    report = run_in_sandbox([(0, PROBE.format(run=run))], [task], limits)
    assert not report.cell_errors, report.cell_errors
    line = next(l for l in report.output_tail.splitlines() if l.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


def test_an_attempt_loads_what_the_reference_run_compiled_and_writes_nothing_back(tmp_path):
    shared = tmp_path / "cache"
    shared.mkdir()
    limits = Limits(cell_timeout_s=120, task_timeout_s=60, inductor_cache=str(shared))

    # The reference run starts cold (the empty cache is the control) and leaves its kernels.
    collected = compile_in_sandbox("reference", replace(limits, collect_cache=True))
    assert collected.get("fxgraph_cache_miss") == 1 and "fxgraph_cache_hit" not in collected
    assert (shared / "planted-reference").is_file()

    warm = compile_in_sandbox("submission", limits)
    assert warm.get("fxgraph_cache_hit") == 1 and "fxgraph_cache_miss" not in warm
    assert not (shared / "planted-submission").exists()
    # Loading a cached kernel compiles nothing: no precompiled header in the fresh TMPDIR
    # (building one took 8 s of g++ per attempt).
    assert warm["precompiled_header"] is False

