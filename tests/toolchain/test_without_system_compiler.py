"""A machine with no system C++ compiler: torch.compile and grading work with zig's clang.

CI's "no system C++ compiler" block hides every compiler, linker and C header and runs
these (with CXX_TOOLCHAIN_REQUIRE_ZIG=1: a skip is then a failure). Elsewhere a system
compiler is in use and they are skipped.
"""
import os
import subprocess

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import cxx_toolchain
from answers import WRONG_ANSWERS
from facts import backs
from grader import chapters
from grader.grading.harness import SOLUTIONS_DIR, grade_notebook
from grader.sandbox.confinement import Limits
from notebook_builders import NOTEBOOKS, answers_only, wrong_answer_source


@pytest.fixture(autouse=True)
def zig_in_use():
    toolchain = cxx_toolchain.current()
    if toolchain.kind != "zig":
        if os.environ.get("CXX_TOOLCHAIN_REQUIRE_ZIG") == "1":
            pytest.fail(f"CXX_TOOLCHAIN_REQUIRE_ZIG=1 but Inductor does not compile with zig here: {toolchain.description}")
        pytest.skip(f"Inductor compiles with the {toolchain.description} here")


FUNCTIONS = {
    "pointwise": lambda x: (x.sin() + 1).relu(),
    "softmax then a column sum (parallel reductions with g++)": lambda x: x.softmax(-1).sum(0),
    "layer norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    "argmax and variance": lambda x: (x.argmax(1), x.var(1)),
    "matmul and gelu": lambda x: torch.nn.functional.gelu(x @ x.T + 1),
}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_compiled_functions_agree_with_eager_and_run_on_one_thread(name):
    torch._dynamo.reset()
    x = torch.randn(512, 2048, generator=torch.Generator().manual_seed(0))
    got, code = run_and_get_code(torch.compile(FUNCTIONS[name]), x)
    want = FUNCTIONS[name](x)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    assert "#pragma omp parallel" not in "\n".join(code)


def test_training_step_gradients_agree_with_eager():
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    x = torch.randn(32, 64)
    torch.compile(model)(x).sum().backward()
    compiled = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for c, e in zip(compiled, (p.grad for p in model.parameters())):
        torch.testing.assert_close(c, e)


def test_a_precompiled_header_still_serves_after_its_headers_get_new_mtimes(tmp_path):
    """What a venv reinstalled at the same path does to Inductor's PCHs (kept in /tmp, keyed by
    content): the headers' content stays, their mtimes change. clang must neither refuse the PCH
    nor include its headers a second time ("redefinition of ...")."""
    (tmp_path / "inner.h").write_text("#pragma once\nstatic inline int answer() { return 42; }\n")
    (tmp_path / "prefix.h").write_text('#pragma once\n#include "inner.h"\n')
    (tmp_path / "kernel.cpp").write_text('#include "prefix.h"\nint main() { return answer() == 42 ? 0 : 1; }\n')
    (tmp_path / "pch.h").write_text('#include "prefix.h"\n')
    compiler = str(cxx_toolchain.WRAPPER)
    subprocess.run([compiler, "-x", "c++-header", "pch.h", "-o", "pch.h.pch"], cwd=tmp_path, check=True)
    later = (tmp_path / "pch.h.pch").stat().st_mtime + 100
    for header in ("inner.h", "prefix.h", "pch.h"):
        os.utime(tmp_path / header, (later, later))
    built = subprocess.run([compiler, "-include", "pch.h", "kernel.cpp", "-o", "kernel"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert subprocess.run([str(tmp_path / "kernel")]).returncode == 0


def test_a_compile_exercise_grades_in_the_sandbox():
    """01.compile_friendly compiles with Inductor, counts its kernels and times it against
    eager: the reference earns every point, a catalogued wrong answer does not."""
    exercise = chapters.get("01.compile_friendly")
    wrong = next(a for a in WRONG_ANSWERS if a.exercise_id == exercise.id and "sort" in a.misconception)
    limits = Limits(protected_paths=(str(SOLUTIONS_DIR),))
    notebook = next(NOTEBOOKS.glob("01_*.ipynb"))
    for answers, passes in (({}, True), ({exercise.id: wrong_answer_source(wrong.function, exercise.function)}, False)):
        graded = grade_notebook(answers_only(notebook, answers), seed=0, limits=limits, exercises=[exercise])
        (result,) = graded.exercises
        assert result.passed is passes, ([(c.case, c.verdict.message) for c in result.cases], graded.notes)


@backs("notebooks/01_compile.ipynb", "ziglang 和 torch 的 wheel 都不带它")
def test_zigs_wheel_has_no_llvm_openmp_runtime():
    package = cxx_toolchain.zig_executable().parent
    assert not [p for p in package.rglob("libomp*")] and not list(package.rglob("omp.h"))
