"""Compile the chip's C++ runtime (``toychip/csrc``) into an extension module, once.

A vendor ships its runtime built; the course ships the sources and builds them on first
import, the way ``torch.utils.cpp_extension.load`` would -- but without ninja or
setuptools: one compiler process per ``.cpp`` (as many at a time as there are cores),
then one link. What it runs, for each file::

    <cxx> -O2 -std=c++20 -fPIC -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI=1
          -DTORCH_EXTENSION_NAME=_C -DTORCH_API_INCLUDE_EXTENSION_H [-DTOYCHIP_WITH_KINETO]
          -isystem <torch's include dirs, and its include/kineto> -isystem <Python.h's dir> -c X.cpp -o X.o
    <cxx> -shared *.o -L<torch/lib> -lc10 -ltorch -ltorch_cpu -ltorch_python

(see ``FLAGS`` for how that differs from ``torch.utils.cpp_extension``.) Like its JIT link,
there is no rpath: :func:`load` imports torch first, so the dynamic loader finds ``libc10.so``
and the others already loaded, and a module built in one venv loads in any other.

The compiler is Inductor's (``$CXX``, else ``g++``; see :mod:`cxx_toolchain`) -- except
zig's clang, which Inductor gets where there is no system compiler: its C++ library is
libc++, torch's is libstdc++, so the module would not load. Where ``torch._inductor`` is already imported,
``torch._inductor.cpp_builder.get_cpp_compiler()`` is asked (it honours
``torch._inductor.config.cpp.cxx``); otherwise :func:`cxx_toolchain.current` makes the
same choice without importing Inductor, which would add 2-3 s to every ``import toychip``.

The module is cached in ``$TOYCHIP_BUILD_DIR``, else ``toychip/_build/``, under a name made
of two hashes and Python's ``EXT_SUFFIX`` (its ABI and platform, as CPython names extension
modules): the sources, the flags and torch's release and git version -- nothing of the
machine, so that a module built elsewhere can be recognised; then the compiler's identity
(its ``--version`` line). The build holds an ``flock`` on the directory's lock file (two
pytest-xdist workers or kernels build once) and moves the finished ``.so`` into place with
``os.replace``.

Without a compiler that can build it (none, or zig's clang), a build of the same sources by
any compiler is used, else the one shipped in ``toychip/prebuilt/`` (built by g++ for Linux
x86_64, one per tested Python, as a vendor ships wheels) if its name has this key: a learner
without ``g++`` still gets the chip, and a changed ``csrc/`` is never run with an old module.

``python -m toychip.runtime_build`` builds it (or says it is there); ``./course`` and CI
run it so that no notebook waits for the compiler. ``--prebuilt`` (re)writes this Python's
module in ``toychip/prebuilt/``: run it with each tested Python after changing ``csrc/``.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import cxx_toolchain

SOURCE_DIR = Path(__file__).with_name("csrc")
DEFAULT_BUILD_DIR = Path(__file__).with_name("_build")
PREBUILT_DIR = Path(__file__).with_name("prebuilt")
# The newest glibc symbol version the prebuilt modules need (objdump -T; a test checks it):
# pthread_once moved into libc in 2.34. Ubuntu 22.04 and Debian 12 have it; Ubuntu 20.04 does not.
PREBUILT_GLIBC = (2, 34)
BUILD_DIR_VARIABLE = "TOYCHIP_BUILD_DIR"
MODULE_NAME = "_C"  # PyInit__C: loaded as toychip._C
LOG_NAME = "runtime-build.log"
# What a build costs one core (g++ 12, -O2, measured on a shared 2-core machine): Module.cpp,
# the one file with pybind11 and torch's Python glue, and the eight others together. Module.cpp
# is compiled first, so with two cores or more the build takes about as long as it does.
MODULE_SECONDS, OTHERS_SECONDS = 16, 16

# As torch.utils.cpp_extension's in torch 2.13 (C++20 is the standard torch's headers are
# written for now), plus: -O2 (its JIT build passes none), hidden visibility (only PyInit__C
# needs exporting; the module is smaller), and _GLIBCXX_USE_CXX11_ABI spelled out (every
# 2.13 wheel uses the new ABI, so cpp_extension dropped it; asked of torch here).
FLAGS = ["-O2", "-std=c++20", "-fPIC", "-fvisibility=hidden"]
LIBRARIES = ["c10", "torch", "torch_cpu", "torch_python"]


built_here: Path | None = None
"""The module this process built, if it built one (``main`` then has nothing to add)."""
prebuilt_used: Path | None = None
"""The prebuilt module this process uses, once it has said so."""


class BuildError(RuntimeError):
    """The runtime could not be built (no compiler, a compile error, a read-only cache)."""


def build_dir() -> Path:
    """Where built modules are cached: ``$TOYCHIP_BUILD_DIR``, else ``toychip/_build``."""
    return Path(os.environ.get(BUILD_DIR_VARIABLE) or DEFAULT_BUILD_DIR)


def find_compiler() -> str | None:
    """The C++ compiler Inductor compiles with here (None: there is none)."""
    if "torch._inductor.config" in sys.modules:
        from torch._inductor import exc
        from torch._inductor.cpp_builder import get_cpp_compiler

        try:
            return get_cpp_compiler()
        except exc.InvalidCxxCompiler:
            pass
    toolchain = cxx_toolchain.current()
    if toolchain.kind == "zig" and not os.environ.get(cxx_toolchain.ZIG_VARIABLE):
        os.environ[cxx_toolchain.ZIG_VARIABLE] = str(cxx_toolchain.zig_executable())
    return toolchain.compiler or None


def uses_libcxx(cxx: str) -> bool:
    """zig's clang (cxx_toolchain's wrapper): fine for Inductor's kernels, which cross into torch
    only through C functions, but a module built with it cannot load here -- every std::string
    in c10's API is libstdc++'s (``undefined symbol: ...NSt3__112basic_string...``)."""
    return Path(cxx).name == cxx_toolchain.WRAPPER.name


def compiler_identity(cxx: str) -> str:
    """The first line of ``<cxx> --version``: a different compiler means another build."""
    result = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True)
    return result.stdout.splitlines()[0].strip() if result.stdout else cxx


def _defines() -> list[str]:
    import torch

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)  # 1 in every torch 2.13 wheel; asked, not assumed
    # The Kineto activity profiler (csrc/ToyChipProfiler.cpp) links against torch's Kineto.
    kineto = ["-DTOYCHIP_WITH_KINETO"] if torch.autograd.kineto_available() else []
    return [f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-DTORCH_EXTENSION_NAME={MODULE_NAME}",
            "-DTORCH_API_INCLUDE_EXTENSION_H", *kineto]


def compile_flags() -> list[str]:
    from torch.utils.cpp_extension import include_paths

    # Kineto's headers (IActivityProfiler.h, which torch's PrivateUse1 profiler registry
    # includes by bare name) ship in include/kineto; cpp_extension leaves them off its list.
    torch_include = include_paths()[0]
    includes = [*include_paths(), os.path.join(torch_include, "kineto"),
                sysconfig.get_path("include", scheme="posix_prefix")]
    return [*FLAGS, *_defines(), *(flag for path in includes for flag in ("-isystem", path))]


def torch_lib_dir() -> Path:
    import torch

    return Path(torch.__file__).parent / "lib"  # torch.utils.cpp_extension.TORCH_LIB_PATH


def link_flags() -> list[str]:
    flags = ["-shared", f"-L{torch_lib_dir()}", *(f"-l{name}" for name in LIBRARIES)]
    if sys.platform == "darwin":
        flags += ["-undefined", "dynamic_lookup"]  # Python's symbols come from the interpreter
    return flags


def source_files(source_dir: Path = SOURCE_DIR) -> list[Path]:
    """The .cpp files, Module.cpp (the slow one) first."""
    return sorted(source_dir.glob("*.cpp"), key=lambda path: (path.name != "Module.cpp", path.name))


def torch_release() -> str:
    """torch's version without its local part: ``2.13.0`` for ``2.13.0+cpu`` and ``2.13.0+cu130``,
    whose headers differ only in build-info strings (the CPU API the runtime uses is the same)."""
    import torch

    return torch.__version__.split("+")[0]


def ext_suffix() -> str:
    """This Python's ABI and platform, as its extension modules' names end
    (``.cpython-311-x86_64-linux-gnu.so``)."""
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def source_key(source_dir: Path = SOURCE_DIR) -> str:
    """What makes a build reusable, apart from the compiler and Python (the file name's suffix):
    sources, flags, torch's release and git version -- no path, so the same on every machine."""
    import torch

    digest = hashlib.sha256()
    for path in sorted([*source_dir.glob("*.cpp"), *source_dir.glob("*.h")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    # The flags themselves (not compile_flags(): torch.utils.cpp_extension takes 0.1 s to
    # import, on every import of toychip); torch's version stands for its include paths.
    for part in (torch_release(), torch.version.git_version, *FLAGS, *_defines(), *LIBRARIES):
        digest.update(str(part).encode() + b"\0")
    return digest.hexdigest()[:16]


def compiler_key(cxx: str) -> str:
    return hashlib.sha256(compiler_identity(cxx).encode()).hexdigest()[:8]


def module_path(directory: Path, source: str, compiler: str) -> Path:
    return directory / f"{MODULE_NAME}-{source}-{compiler}{ext_suffix()}"


def prebuilt_path(source: str) -> Path:
    """Where this Python's prebuilt module of sources ``source`` is (torch's release is in the
    name so that a mismatch can be explained)."""
    return PREBUILT_DIR / f"{MODULE_NAME}-{source}-torch{torch_release()}{ext_suffix()}"


def can_build(cxx: str | None) -> bool:
    return cxx is not None and not uses_libcxx(cxx)


def cached(source_dir: Path = SOURCE_DIR, directory: Path | None = None) -> tuple[Path | None, str | None]:
    """(the cached module, or None; the compiler found here, or None if there is none)."""
    directory = build_dir() if directory is None else directory
    source, cxx = source_key(source_dir), find_compiler()
    if can_build(cxx):
        path = module_path(directory, source, compiler_key(cxx))
        return (path if path.is_file() else None), cxx
    # Nothing here can build it (a grading sandbox, zig's clang): any compiler's build will do.
    others = sorted(directory.glob(f"{MODULE_NAME}-{source}-*{ext_suffix()}"))
    return (others[0] if others else None), cxx


def _writable(directory: Path) -> bool:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK)


def ensure_built(source_dir: Path = SOURCE_DIR, directory: Path | None = None, *, quiet: bool = False) -> Path:
    """The runtime's extension module, built first if the cache does not have it."""
    directory = build_dir() if directory is None else directory
    path, cxx = cached(source_dir, directory)
    if path is not None:
        return path
    if not can_build(cxx):
        return _prebuilt(source_dir, cxx, quiet=quiet)
    if not _writable(directory):
        raise BuildError(f"toychip 的 C++ 运行时还没有编译，而缓存目录 {directory} 不可写：请先运行 "
                         f"`python -m toychip.runtime_build`。\n"
                         f"toychip's C++ runtime is not built and {directory} is read-only: run "
                         f"`python -m toychip.runtime_build` first (or set ${BUILD_DIR_VARIABLE}).")
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits here, then finds the module
        path, cxx = cached(source_dir, directory)
        if path is not None:
            return path
        target = module_path(directory, source_key(source_dir), compiler_key(cxx))
        _build(cxx, source_files(source_dir), target, quiet=quiet)
        return target


def _prebuilt(source_dir: Path, cxx: str | None, *, quiet: bool) -> Path:
    """The shipped module, if it fits; else why not, with what to install."""
    global prebuilt_used
    path = prebuilt_path(source_key(source_dir))
    misfit = prebuilt_misfit(path, source_dir)
    if misfit is None:
        if prebuilt_used != path:
            prebuilt_used = path
            _say(quiet, f"toychip: using the prebuilt C++ runtime {path} (no compiler here can build it; "
                        f"with g++ installed it is built from source) / toychip：使用预编译的 C++ 运行时"
                        f"（本机没有能编译它的编译器；装上 g++ 后改为从源码编译）")
        return path
    if cxx is None:
        toolchain = cxx_toolchain.current()
        why = (f"toychip 的 C++ 运行时要在第一次导入时编译，但这里编译不了 / toychip's C++ runtime "
               f"is compiled on first import, and cannot be here ({toolchain.description}).")
        remedy = toolchain.remedy or cxx_toolchain.install_hint()
    else:
        why = (f"toychip 的 C++ 运行时不能用 zig 的 clang 编译：它的 C++ 标准库是 libc++，而 PyTorch 是用 "
               f"libstdc++ 编译的，两者的 std::string 不兼容。/ toychip's C++ runtime cannot be built with "
               f"zig's clang ({cxx}): it uses libc++, and torch is built against libstdc++.")
        remedy = cxx_toolchain.install_hint()
    raise BuildError(f"{why}\n{misfit}\n{remedy}")


def prebuilt_misfit(path: Path, source_dir: Path = SOURCE_DIR) -> str | None:
    """Why the prebuilt module ``path`` (named by :func:`prebuilt_path`) cannot be used here, or None."""
    suffix = ext_suffix()
    if not path.is_file():
        ours = sorted(PREBUILT_DIR.glob(f"{MODULE_NAME}-*{suffix}"))
        if not ours:
            shipped = sorted(other.name.rsplit(".", 2)[1] for other in PREBUILT_DIR.glob(f"{MODULE_NAME}-*"))
            return (f"预编译的运行时没有这个 Python 和平台的版本 / no prebuilt runtime is shipped for this Python "
                    f"and platform ({suffix.rsplit('.', 2)[1]}; there are: {', '.join(shipped) or 'none'}).")
        release = ours[0].name.removesuffix(suffix).split("-torch")[-1]
        if release != torch_release():
            return (f"预编译的运行时是为 torch {release} 编译的，这里是 torch {torch_release()} / the prebuilt runtime "
                    f"{ours[0]} was built for torch {release}, and this is torch {torch_release()}.")
        return (f"预编译的运行时不是用现在的 csrc/ 编译的 / the prebuilt runtime {ours[0]} was built from other "
                f"sources than {source_dir} (changed since: `python -m toychip.runtime_build --prebuilt` "
                f"with each Python rebuilds it), or for another build of torch {torch_release()}.")
    libc, version = platform.libc_ver()
    have = tuple(int(part) for part in version.split(".")[:2]) if libc == "glibc" and version else None
    if have is not None and have < PREBUILT_GLIBC:
        need = ".".join(map(str, PREBUILT_GLIBC))
        return (f"预编译的运行时需要 glibc ≥ {need}，这里是 glibc {version} / the prebuilt runtime {path} "
                f"needs glibc ≥ {need}, and this is glibc {version}.")
    return None


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def _build(cxx: str, sources: list[Path], target: Path, *, quiet: bool) -> None:
    jobs = max(1, min(os.cpu_count() or 1, len(sources)))
    estimate = max(MODULE_SECONDS, (MODULE_SECONDS + OTHERS_SECONDS) / jobs)
    _say(quiet, f"toychip: building the chip's C++ runtime (first import; about {estimate:.0f} s "
                f"on {jobs} core{'s' if jobs > 1 else ''})…")
    start, steps = time.monotonic(), len(sources) + 1
    log_path = target.parent / LOG_NAME
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as scratch, \
            open(log_path, "w") as log:
        flags, done, objects, running, failed = compile_flags(), 0, [], {}, []
        todo = list(sources)
        while todo or running:
            while todo and len(running) < jobs:
                source = todo.pop(0)
                obj = Path(scratch) / f"{source.stem}.o"
                command = [cxx, *flags, "-c", str(source), "-o", str(obj)]
                # Output to a file, not a pipe: a long template error would fill the pipe and
                # block the compiler, which this loop only reads after it exits.
                output_path = obj.with_suffix(".out")
                with open(output_path, "w") as output_file:
                    process = subprocess.Popen(command, stdout=output_file, stderr=subprocess.STDOUT)
                running[process] = (source, output_path, command, time.monotonic())
                objects.append(obj)
            process = _wait_any(running)
            source, output_path, command, began = running.pop(process)
            output = output_path.read_text(errors="replace")
            log.write(f"$ {' '.join(command)}\n{output}\n")
            if process.returncode != 0:
                failed.append((source, output))
                todo.clear()  # let the running ones finish, start no more
                continue
            done += 1
            _say(quiet, f"[{done}/{steps}] compiled {source.name} ({time.monotonic() - began:.1f} s)")
        if failed:
            log.flush()
            raise BuildError(_compile_error(failed, log_path))
        began = time.monotonic()
        partial = Path(scratch) / target.name
        command = [cxx, *(str(o) for o in objects), "-o", str(partial), *link_flags()]
        result = subprocess.run(command, capture_output=True, text=True)
        log.write(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}\n")
        if result.returncode != 0:
            log.flush()
            raise BuildError(_compile_error([(target, result.stdout + result.stderr)], log_path, "link"))
        os.replace(partial, target)
    global built_here
    built_here = target
    _say(quiet, f"[{steps}/{steps}] linked {target.name} ({time.monotonic() - began:.1f} s)")
    _say(quiet, f"toychip: runtime built in {time.monotonic() - start:.0f} s: {target}")


def _wait_any(running: dict) -> subprocess.Popen:
    """The first of the running compilers to finish (polling: a handful of processes)."""
    while True:
        for process in running:
            if process.poll() is not None:
                return process
        time.sleep(0.05)


_ERROR_LINE = re.compile(r"\b(error|fatal error|undefined reference)\b", re.IGNORECASE)


def _compile_error(failed: list[tuple[Path, str]], log_path: Path, step: str = "compile") -> str:
    """The compiler's own error lines (each with the source lines it quotes), not its command."""
    lines = []
    for source, output in failed:
        keep = False
        for line in output.splitlines():
            if _ERROR_LINE.search(line):
                keep = True
                lines.append(line)
            elif keep and line.startswith(" "):
                lines.append(line)  # the quoted source and its caret
            else:
                keep = False
        if not any(_ERROR_LINE.search(line) for line in output.splitlines()):
            lines.extend(output.splitlines()[-10:])
    shown = "\n".join(lines[:40]) + ("\n…" if len(lines) > 40 else "")
    what = "编译" if step == "compile" else "链接"
    return (f"toychip 的 C++ 运行时{what}失败 / toychip's C++ runtime failed to {step}:\n{shown}\n"
            f"完整日志 / full log: {log_path}")


def load(path: Path):
    """Import the built module as ``toychip._C`` (torch first: the module links against it)."""
    import torch  # noqa: F401 -- libtorch_python must be loaded and initialised

    name = f"toychip.{MODULE_NAME}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def exit_if_command(error: BuildError) -> None:
    """Under ``python -m toychip.runtime_build`` (whose package import builds), report ``error``
    like :func:`main` does and exit 1; elsewhere, return (the import raises it)."""
    argv = getattr(sys, "orig_argv", [])
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == __name__:
        print(f"错误 / error: {error}", file=sys.stderr)
        raise SystemExit(1)


def write_prebuilt() -> Path:
    """This Python's module in ``prebuilt/``, built by this machine's compiler (or taken from its
    cache: the same build), replacing the module shipped before for this Python."""
    cxx = find_compiler()
    if not can_build(cxx):
        raise BuildError(f"--prebuilt 需要能编译运行时的编译器 / --prebuilt needs a compiler that can build the "
                         f"runtime (found: {cxx or 'none'}).\n{cxx_toolchain.install_hint()}")
    built = ensure_built()
    target = prebuilt_path(source_key())
    PREBUILT_DIR.mkdir(exist_ok=True)
    for old in PREBUILT_DIR.glob(f"{MODULE_NAME}-*{ext_suffix()}"):
        old.unlink()
    shutil.copyfile(built, target)
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m toychip.runtime_build [--prebuilt]``: build the runtime, or say it is already built.

    ``-m`` imports the package first, and ``import toychip`` loads the runtime: a build
    happens there, with its progress lines, and this only reports a cache hit (or the
    prebuilt module, which the import already named).
    """
    parser = argparse.ArgumentParser(prog="python -m toychip.runtime_build",
                                     description="Build toychip's C++ runtime, or say it is already built.")
    parser.add_argument("--prebuilt", action="store_true",
                        help="(re)write this Python's module in toychip/prebuilt/ (after changing csrc/)")
    args = parser.parse_args(argv)
    try:
        path = write_prebuilt() if args.prebuilt else ensure_built()
    except BuildError as error:
        print(f"错误 / error: {error}", file=sys.stderr)
        return 1
    if args.prebuilt:
        print(f"toychip: prebuilt runtime written: {path} ({path.stat().st_size / 1024:.0f} KiB, "
              f"{compiler_identity(find_compiler())})", file=sys.stderr)
    elif path not in (built_here, prebuilt_used):
        print(f"toychip: runtime already built: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    # This file runs as __main__, a second copy; the package's copy holds what the import did.
    from toychip.runtime_build import main as imported_main

    sys.exit(imported_main())
