"""cxx_toolchain: which C++ compiler Inductor uses, decided before anything breaks.

These run on any machine: zig itself is replaced by a script that records its arguments,
and the system compiler is hidden or provided through PATH. What only a machine without
a compiler can show lives in test_without_system_compiler.py.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cxx_toolchain
from cxx_toolchain import __main__ as cli
from cxx_toolchain.after_import import after_import
from grader.errors import GraderError
from grader.grading.harness import grade_notebook
from grader.sandbox import driver
from grader.grading.feedback import failure_message
from grader.sandbox.calls import call_learner, read_outcome
from grader.sandbox.outcome import Failure, FailureKind

REPO = Path(__file__).resolve().parents[2]


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def no_system_compiler(monkeypatch, tmp_path):
    """PATH without g++ or clang++ (but with sh and dirname, which zig-clang++ needs)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "dirname"):
        os.symlink(subprocess.check_output(["sh", "-c", f"command -v {tool}"], text=True).strip(), bin_dir / tool)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CXX", raising=False)
    for variable in (cxx_toolchain.ZIG_VARIABLE, cxx_toolchain.ZIG_LOCAL_CACHE_VARIABLE):
        monkeypatch.delenv(variable, raising=False)  # set by this process's own import torch
    return bin_dir


@pytest.fixture
def fake_ziglang(tmp_path):
    """A ``ziglang`` package whose ``zig`` writes its arguments to zig.args."""
    package = tmp_path / "site" / "ziglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    executable(package / "zig", f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/zig.args\n')
    return package


def test_a_system_compiler_on_path_is_kept(no_system_compiler, capsys):
    executable(no_system_compiler / "g++", "#!/bin/sh\n")
    assert cxx_toolchain.current().kind == "system"
    assert cli.main(["plan"]) == 0 and capsys.readouterr().out == "system\n"


def test_cxx_names_the_system_compiler(no_system_compiler, monkeypatch, tmp_path):
    compiler = executable(tmp_path / "my-c++", "#!/bin/sh\n")
    monkeypatch.setenv("CXX", str(compiler))
    assert cxx_toolchain.current().compiler == str(compiler)


def test_without_a_compiler_the_plan_is_zig_where_its_wheel_was_tried(no_system_compiler, monkeypatch, capsys):
    monkeypatch.setattr(cxx_toolchain.platform, "system", lambda: "Linux")
    monkeypatch.setattr(cxx_toolchain.platform, "machine", lambda: "x86_64")
    assert cli.main(["plan"]) == 0 and capsys.readouterr().out == "zig\n"


def test_without_a_compiler_elsewhere_the_plan_says_what_to_install(no_system_compiler, monkeypatch, capsys):
    monkeypatch.setattr(cxx_toolchain.platform, "system", lambda: "Linux")
    monkeypatch.setattr(cxx_toolchain.platform, "machine", lambda: "riscv64")
    assert cli.main(["plan"]) == 1
    out, err = capsys.readouterr()
    assert out == "none\n" and "sudo apt-get install g++" in err and "错误" in err


def test_a_python_without_its_headers_is_named_up_front(monkeypatch, tmp_path, capsys):
    """Every Inductor CPU kernel includes Python.h (it loads as an extension module)."""
    monkeypatch.setattr(cxx_toolchain.sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    assert cli.main(["plan"]) == 1
    out, err = capsys.readouterr()
    version = "%d.%d" % sys.version_info[:2]
    assert out == "none\n" and f"python{version}-dev" in err and "Python.h" in err
    assert "Python.h" in cxx_toolchain.missing_message()


@pytest.mark.parametrize("output", ["k.cpp:31:10: fatal error: 'Python.h' file not found",   # clang
                                    "k.cpp:31:10: fatal error: Python.h: No such file or directory"])  # gcc
def test_a_kernel_that_cannot_find_python_h_is_recognised(output):
    from torch._inductor.exc import CppCompileError

    assert cxx_toolchain.compiler_missing(CppCompileError(["c++", "k.cpp"], output))


def test_the_install_hint_on_macos_is_the_command_line_tools(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "xcode-select --install" in cxx_toolchain.install_hint()


def test_the_plan_needs_only_the_standard_library():
    """./course asks before anything is installed, with the system Python and PYTHONPATH=lib."""
    probe = "import sys, cxx_toolchain.__main__; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-S", "-c", probe], env={**os.environ, "PYTHONPATH": str(REPO / "lib")},
                         capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"


def test_zig_is_used_only_when_no_system_compiler_is_there(no_system_compiler, fake_ziglang, monkeypatch):
    monkeypatch.syspath_prepend(str(fake_ziglang.parent))
    assert cxx_toolchain.current().kind == "zig"
    executable(no_system_compiler / "g++", "#!/bin/sh\n")
    assert cxx_toolchain.current().kind == "system"


def test_the_wrapper_swaps_openmp_for_the_one_thread_header_and_writes_pchs_checked_by_content(fake_ziglang, tmp_path):
    arguments = ["-O3", "-fopenmp", "-march=native", "kernel.cpp", "-lgomp", "-lc10", "-o", "kernel.so"]
    subprocess.run([str(cxx_toolchain.WRAPPER), *arguments], check=True,
                   env={**os.environ, cxx_toolchain.ZIG_VARIABLE: str(fake_ziglang / "zig")})
    passed = (tmp_path / "zig.args").read_text().splitlines()
    include = str(cxx_toolchain.WRAPPER.parent / "include")
    assert passed == ["c++", "-fpch-validate-input-files-content", "-Xclang", "-fno-pch-timestamp", "-isystem", include, "-O3", "-fopenmp-simd", "-march=native", "kernel.cpp",
                      "-lc10", "-o", "kernel.so"]
    assert (Path(include) / "omp.h").is_file()


def test_the_wrappers_version_names_its_pch_format_so_inductor_keys_pchs_by_it(fake_ziglang):
    version = subprocess.run([str(cxx_toolchain.WRAPPER), "-v"], capture_output=True, text=True, check=True,
                             env={**os.environ, cxx_toolchain.ZIG_VARIABLE: str(fake_ziglang / "zig")})
    assert "precompiled headers without timestamps" in version.stdout


def test_the_wrapper_says_what_is_missing_without_zig(monkeypatch):
    monkeypatch.delenv(cxx_toolchain.ZIG_VARIABLE, raising=False)
    run = subprocess.run([str(cxx_toolchain.WRAPPER), "--version"], capture_output=True, text=True)
    assert run.returncode == 2 and cxx_toolchain.ZIG_VARIABLE in run.stderr


def test_after_import_runs_once_the_module_is_imported(tmp_path, monkeypatch):
    (tmp_path / "watched_module_for_test.py").write_text("value = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    after_import("watched_module_for_test", lambda module: seen.append(module.value))
    assert seen == []
    import watched_module_for_test  # noqa: F401
    assert seen == [1]
    after_import("watched_module_for_test", lambda module: seen.append(module.value + 1))
    assert seen == [1, 2]
    del sys.modules["watched_module_for_test"]


AUTOLOAD_PROBE = textwrap.dedent("""
    import os, torch
    import torch._inductor.config as config
    print(config.cpp.cxx[-1], config.cpp.threads, os.environ.get("CXX_TOOLCHAIN_ZIG", ""),
          os.environ.get("ZIG_LOCAL_CACHE_DIR", ""))
""")


def test_import_torch_points_inductor_at_zig_without_a_system_compiler(no_system_compiler, fake_ziglang, monkeypatch,
                                                                      tmp_path):
    monkeypatch.setenv(cxx_toolchain.ZIG_CACHE_VARIABLE, str(tmp_path / "zig"))
    env = {**os.environ, "PYTHONPATH": f"{fake_ziglang.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", AUTOLOAD_PROBE], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(cxx_toolchain.WRAPPER), "1", str(fake_ziglang / "zig"), str(tmp_path / "zig-local")]


def test_import_torch_leaves_inductor_alone_with_a_system_compiler(no_system_compiler, fake_ziglang):
    executable(no_system_compiler / "g++", "#!/bin/sh\n")
    env = {**os.environ, "PYTHONPATH": f"{fake_ziglang.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", AUTOLOAD_PROBE], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["g++", "-1"]


def raise_missing_compiler():
    """What torch.compile raises when Inductor finds no compiler (InductorError wraps it)."""
    from torch._inductor.exc import InductorError, InvalidCxxCompiler

    try:
        raise InvalidCxxCompiler()
    except InvalidCxxCompiler as error:
        raise InductorError(error, None) from error


def test_a_missing_compiler_is_recognised_through_inductors_wrapping():
    with pytest.raises(Exception) as caught:
        raise_missing_compiler()
    assert cxx_toolchain.compiler_missing(caught.value)
    assert not cxx_toolchain.compiler_missing(ValueError("g"))


def test_a_failed_warm_up_shows_the_compilers_error_lines_not_its_command():
    from torch._inductor.exc import CppCompileError, InductorError
    output = "In file included from k.cpp:1:\nk.cpp:3:5: error: unknown type name 'vec'\n1 error generated."
    try:
        try:
            raise CppCompileError(["zig-clang++", "-D FLAG " * 500, "k.cpp"], output)
        except CppCompileError as compile_error:
            raise InductorError(compile_error, None) from compile_error
    except InductorError as error:
        complaint = cli.compiler_complaint(error)
    assert "k.cpp:3:5: error: unknown type name 'vec'" in complaint
    assert "-D FLAG" not in complaint and "In file included" not in complaint


def test_a_missing_compiler_is_the_machines_problem_in_a_check(monkeypatch):
    outcome = read_outcome(call_learner(lambda: raise_missing_compiler(), lambda function, built: function(), {}))
    assert outcome == Failure(FailureKind.ENVIRONMENT, cxx_toolchain.missing_message())
    assert "本机没有 C++ 编译器" in failure_message(outcome)


def test_grading_without_any_compiler_grades_nothing_and_says_why(monkeypatch):
    missing = cxx_toolchain.Toolchain("missing", "", "no C++ compiler", cxx_toolchain.install_hint())
    monkeypatch.setattr(cxx_toolchain, "current", lambda: missing)
    with pytest.raises(GraderError, match="environment problem, nothing graded"):
        grade_notebook(None, seed=0)


def test_a_notebook_cell_without_any_compiler_ends_with_the_chinese_explanation(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    from cxx_toolchain.notebook_message import explain_in_notebooks

    shell = InteractiveShell.instance()
    explain_in_notebooks(cxx_toolchain.compiler_missing, cxx_toolchain.missing_message)
    assert shell.custom_exceptions == (Exception,)
    shell.user_ns["raise_missing_compiler"] = raise_missing_compiler
    try:
        shell.run_cell("raise_missing_compiler()")
        assert cxx_toolchain.missing_message() in capsys.readouterr().err
        shell.run_cell("1 / 0")
        assert "ZeroDivisionError" in capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()


def test_each_sandbox_gets_its_own_copy_of_zigs_runtime(monkeypatch, tmp_path):
    runtime = tmp_path / "zig-cache"
    (runtime / "o").mkdir(parents=True)
    (runtime / "o" / "libc++.a").write_text("runtime")
    monkeypatch.setenv(cxx_toolchain.ZIG_CACHE_VARIABLE, str(runtime))
    monkeypatch.setattr(cxx_toolchain, "current", lambda: cxx_toolchain.Toolchain("zig", "zig-clang++", "zig"))
    home = tmp_path / "home"
    driver._seed_zig_cache(home, None)
    assert (home / driver.ZIG_CACHE / "o" / "libc++.a").read_text() == "runtime"
    assert driver._clean_environment(str(home), "", None)[cxx_toolchain.ZIG_CACHE_VARIABLE] == f"{home}/{driver.ZIG_CACHE}"


def test_every_cpu_kernel_includes_python_h_so_python_needs_its_headers():
    """The README's reason for asking for python3.X-dev: Inductor's CPU kernels load as
    extension modules (async_compile.cpp_pybinding) whose glue includes Python.h."""
    import inspect

    from torch._inductor.codecache import CppPythonBindingsCodeCache
    from torch._inductor.codegen import cpp

    assert "#include <Python.h>" in CppPythonBindingsCodeCache.suffix_template
    assert "async_compile.cpp_pybinding(" in inspect.getsource(cpp)
