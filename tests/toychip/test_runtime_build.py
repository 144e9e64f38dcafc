"""Does the runtime's build compile once, cache by what matters, and fail clearly?
Without a compiler that can build it, is the prebuilt module used when (and only when) it fits?

A tiny extension (Python.h only: it compiles in a second) stands in for csrc/, built into
a temporary directory with the same flags, compiler and cache as the real runtime.
"""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toychip import runtime, runtime_build

TINY = textwrap.dedent("""\
    #include <Python.h>
    static struct PyModuleDef tiny = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
    PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&tiny); }
    """)

needs_compiler = pytest.mark.skipif(not runtime_build.can_build(runtime_build.find_compiler()),
                                    reason="no C++ compiler here that can build the runtime")
TESTED_PYTHONS = {"cpython-311-x86_64-linux-gnu", "cpython-312-x86_64-linux-gnu", "cpython-313-x86_64-linux-gnu"}
REBUILD = "csrc changed: run python -m toychip.runtime_build --prebuilt with each Python"
needs_prebuilt = pytest.mark.skipif(runtime_build.ext_suffix().rsplit(".", 2)[1] not in TESTED_PYTHONS,
                                    reason="no prebuilt runtime for this Python and platform")
README = Path(__file__).parents[2] / "README.md"


@pytest.fixture
def sources(tmp_path):
    folder = tmp_path / "csrc"
    folder.mkdir()
    (folder / "Module.cpp").write_text(TINY)
    (folder / "Other.cpp").write_text("int toychip_other() { return 1; }\n")
    return folder


@needs_compiler
def test_the_runtime_loaded_is_the_cached_build():
    path, cxx = runtime_build.cached()
    assert path is not None and cxx is not None
    assert Path(runtime._C.__file__) == path
    assert path.parent == runtime_build.build_dir()


@needs_compiler
def test_a_cache_miss_builds_with_progress_and_a_hit_is_silent(sources, tmp_path, capfd):
    built = runtime_build.ensure_built(sources, tmp_path / "build")
    err = capfd.readouterr().err.splitlines()
    assert err[0].startswith("toychip: building the chip's C++ runtime (first import; about ")
    assert sorted(line.split()[2] for line in err[1:3]) == ["Module.cpp", "Other.cpp"]  # in finishing order
    assert err[1].startswith("[1/3] compiled ") and err[2].startswith("[2/3] compiled ")
    assert err[3].startswith("[3/3] linked ")
    assert err[-1] == f"toychip: runtime built in {err[-1].split()[4]} s: {built}"
    assert built.is_file() and not list((tmp_path / "build").glob(".build-*"))  # scratch removed
    mtime = built.stat().st_mtime_ns
    assert runtime_build.ensure_built(sources, tmp_path / "build") == built
    assert capfd.readouterr().err == ""
    assert built.stat().st_mtime_ns == mtime


@needs_compiler
def test_the_key_changes_with_the_sources_and_the_compiler(sources, monkeypatch):
    cxx = runtime_build.find_compiler()
    source, compiler = runtime_build.source_key(sources), runtime_build.compiler_key(cxx)
    (sources / "Other.cpp").write_text("int toychip_other() { return 2; }\n")
    assert runtime_build.source_key(sources) != source
    changed = runtime_build.source_key(sources)
    (sources / "Extra.h").write_text("// a header counts too\n")
    assert runtime_build.source_key(sources) not in (source, changed)
    monkeypatch.setattr(runtime_build, "compiler_identity", lambda cxx: "clang version 99")
    assert runtime_build.compiler_key(cxx) != compiler


def test_the_key_names_torch_but_not_the_machine(sources, monkeypatch, tmp_path):
    import torch

    source = runtime_build.source_key(sources)
    monkeypatch.setattr(runtime_build, "torch_lib_dir", lambda: tmp_path / "another-venv")
    monkeypatch.setattr(torch, "__version__", runtime_build.torch_release() + "+cu130")  # PyPI's CUDA build
    assert runtime_build.source_key(sources) == source
    monkeypatch.setattr(torch.version, "git_version", "0" * 40)
    assert runtime_build.source_key(sources) != source


@needs_compiler
def test_a_compile_error_shows_the_compiler_s_lines_and_the_log(sources, tmp_path):
    (sources / "Other.cpp").write_text("int toychip_other() { return undeclared_name; }\n")
    with pytest.raises(runtime_build.BuildError) as caught:
        runtime_build.ensure_built(sources, tmp_path / "build", quiet=True)
    message = str(caught.value)
    assert "Other.cpp:1" in message and "error" in message and "undeclared_name" in message
    assert "-DTORCH_EXTENSION_NAME" not in message  # the command line stays in the log
    log = tmp_path / "build" / runtime_build.LOG_NAME
    assert str(log) in message and "-DTORCH_EXTENSION_NAME" in log.read_text()
    assert not list((tmp_path / "build").glob("_C-*"))


@needs_compiler
def test_a_read_only_cache_without_the_build_says_to_build_it_first(sources, tmp_path, monkeypatch):
    monkeypatch.setattr(runtime_build, "_writable", lambda directory: False)
    with pytest.raises(runtime_build.BuildError, match=r"python -m toychip\.runtime_build"):
        runtime_build.ensure_built(sources, tmp_path / "build")


@needs_compiler
def test_without_a_compiler_a_build_of_the_same_sources_is_used(sources, tmp_path, monkeypatch):
    built = runtime_build.ensure_built(sources, tmp_path / "build", quiet=True)
    monkeypatch.setattr(runtime_build, "find_compiler", lambda: None)
    assert runtime_build.ensure_built(sources, tmp_path / "build") == built
    (sources / "Other.cpp").write_text("int toychip_other() { return 3; }\n")
    with pytest.raises(runtime_build.BuildError, match="C\\+\\+"):
        runtime_build.ensure_built(sources, tmp_path / "build")


@needs_compiler
def test_two_processes_build_once(sources, tmp_path):
    """The flock: the second builder waits, then finds the first one's module."""
    code = ("import sys; from pathlib import Path; from toychip import runtime_build as b; "
            "print(b.ensure_built(Path(sys.argv[1]), Path(sys.argv[2])))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [subprocess.Popen([sys.executable, "-c", code, str(sources), str(tmp_path / "build")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 0 for run in runs), outputs
    assert outputs[0][0] == outputs[1][0]
    assert sum(err.count("compiled Module.cpp") for _, err in outputs) == 1


@needs_compiler
def test_the_command_line_reports_a_cache_hit():
    result = subprocess.run([sys.executable, "-m", "toychip.runtime_build"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == f"toychip: runtime already built: {runtime_build.cached()[0]}"


def test_zig_s_clang_is_refused_with_what_to_install(sources, tmp_path, monkeypatch):
    import cxx_toolchain

    monkeypatch.setattr(runtime_build, "find_compiler", lambda: str(cxx_toolchain.WRAPPER))
    monkeypatch.setattr(runtime_build, "compiler_identity", lambda cxx: "clang version 22")
    with pytest.raises(runtime_build.BuildError, match="libstdc\\+\\+") as caught:
        runtime_build.ensure_built(sources, tmp_path / "build")
    assert cxx_toolchain.install_command() in str(caught.value)


def test_the_command_line_reports_a_failed_build_without_a_traceback(tmp_path):
    broken = tmp_path / "g++"  # runs, and fails every compile (without a compiler the prebuilt one is used)
    broken.write_text('#!/bin/sh\necho "broken g++ 1.0"\n[ "$1" = --version ] || { echo "error: broken"; exit 1; }\n')
    broken.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CXX": str(broken),
           runtime_build.BUILD_DIR_VARIABLE: str(tmp_path / "build")}
    result = subprocess.run([sys.executable, "-m", "toychip.runtime_build"], capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 1
    assert "\n错误 / error: toychip 的 C++ 运行时编译失败" in result.stderr and "error: broken" in result.stderr
    assert "Traceback" not in result.stderr


def shipped() -> dict[str, Path]:
    """The prebuilt modules, by the Python and platform they are for."""
    return {path.name.rsplit(".", 2)[1]: path for path in runtime_build.PREBUILT_DIR.glob("_C-*")}


def test_a_prebuilt_module_of_these_sources_is_shipped_for_each_tested_python():
    modules = shipped()
    assert set(modules) == TESTED_PYTHONS
    name = runtime_build.prebuilt_path(runtime_build.source_key()).name  # the key is the same for every Python
    for tag, path in modules.items():
        assert path.name == name.replace(runtime_build.ext_suffix(), f".{tag}.so"), REBUILD


def test_the_prebuilt_modules_need_the_glibc_the_readme_names():
    needed = {(int(major), int(minor)) for path in shipped().values()
              for major, minor in re.findall(rb"GLIBC_(\d+)\.(\d+)", path.read_bytes())}
    assert max(needed) == runtime_build.PREBUILT_GLIBC
    assert README.read_text().count("glibc ≥ %d.%d" % runtime_build.PREBUILT_GLIBC) == 2  # both languages


@needs_prebuilt
@pytest.mark.parametrize("compiler", ["none", "zig"])
def test_without_a_compiler_that_can_build_it_the_prebuilt_module_is_used(compiler, tmp_path, monkeypatch, capfd):
    import cxx_toolchain

    found = str(cxx_toolchain.WRAPPER) if compiler == "zig" else None
    monkeypatch.setattr(runtime_build, "find_compiler", lambda: found)
    monkeypatch.setattr(runtime_build, "prebuilt_used", None)
    path = runtime_build.ensure_built(directory=tmp_path / "build")
    assert path == runtime_build.prebuilt_path(runtime_build.source_key()) and path.is_file()
    err = capfd.readouterr().err
    assert err.startswith(f"toychip: using the prebuilt C++ runtime {path} ") and err.count("\n") == 1
    assert "with g++ installed it is built from source" in err and "预编译" in err
    assert runtime_build.ensure_built(directory=tmp_path / "build") == path
    assert capfd.readouterr().err == ""  # said once


@needs_prebuilt
def test_a_fresh_process_without_a_compiler_loads_the_prebuilt_module(tmp_path):
    """Without an rpath: load() imports torch first, so libc10.so and the others are found loaded."""
    assert not any("rpath" in flag for flag in runtime_build.link_flags())
    code = "import toychip, torch; print(torch.ones(2, device='toychip') * 2); print(toychip.runtime._C.__file__)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CXX": str(tmp_path / "no-such-g++"),
           runtime_build.BUILD_DIR_VARIABLE: str(tmp_path / "build")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["tensor([2., 2.], device='toychip:0')",
                                          str(runtime_build.prebuilt_path(runtime_build.source_key()))]


def test_without_a_compiler_or_a_fitting_prebuilt_module_the_error_says_why(sources, tmp_path, monkeypatch):
    import cxx_toolchain

    monkeypatch.setattr(runtime_build, "find_compiler", lambda: None)
    monkeypatch.setattr(runtime_build, "PREBUILT_DIR", tmp_path / "prebuilt")
    (tmp_path / "prebuilt").mkdir()

    def error() -> str:
        with pytest.raises(runtime_build.BuildError) as caught:
            runtime_build.ensure_built(sources, tmp_path / "build")
        assert "C++" in str(caught.value) and cxx_toolchain.install_command() in str(caught.value)
        return str(caught.value)

    assert "no prebuilt runtime is shipped for this Python and platform" in error()
    (tmp_path / "prebuilt" / "_C-0123456789abcdef-torch2.13.0.cpython-399-x86_64-linux-gnu.so").touch()
    assert "there are: cpython-399-x86_64-linux-gnu)" in error()
    older = runtime_build.prebuilt_path("0" * 16)
    older.touch()
    assert f"{older} was built from other sources than {sources}" in error()
    release = runtime_build.torch_release()
    older.rename(older.with_name(older.name.replace(f"torch{release}", "torch2.12.0")))
    assert f"was built for torch 2.12.0, and this is torch {release}" in error()
    runtime_build.prebuilt_path(runtime_build.source_key(sources)).touch()
    monkeypatch.setattr(runtime_build.platform, "libc_ver", lambda: ("glibc", "2.31"))
    assert "needs glibc ≥ %d.%d, and this is glibc 2.31" % runtime_build.PREBUILT_GLIBC in error()


@needs_compiler
def test_the_prebuilt_option_replaces_this_python_s_module_only(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(runtime_build, "PREBUILT_DIR", tmp_path)
    runtime_build.prebuilt_path("0" * 16).write_bytes(b"an older build")
    other = tmp_path / "_C-0123456789abcdef-torch2.13.0.cpython-399-x86_64-linux-gnu.so"
    other.touch()
    assert runtime_build.main(["--prebuilt"]) == 0
    written = runtime_build.prebuilt_path(runtime_build.source_key())
    assert sorted(tmp_path.iterdir()) == sorted([written, other])
    assert written.read_bytes() == Path(runtime._C.__file__).read_bytes()  # the cached build: the same build
    assert capfd.readouterr().err.startswith(f"toychip: prebuilt runtime written: {written} (")
