"""The C++ compiler Inductor uses here: the system's, or zig's clang from pip.

On the CPU, Inductor compiles the C++ it generates with ``$CXX``, else ``g++`` (``clang++``
on macOS). A laptop may have none: Ubuntu until ``build-essential``, a Mac until the Xcode
command-line tools. On Linux x86_64 ``./course`` then installs ``ziglang`` from PyPI (the
``toolchain`` extra), a clang with its own C library headers and linker, and ``_autoload``
points Inductor at it through ``zig-clang++``; elsewhere it says what to install. Whenever
Inductor's own choice (``$CXX``, else ``g++``) is there, it is used. ``_autoload`` is a
``torch.backends`` entry point because that is the one hook torch runs in every process
that imports it (kernels, test workers, grading sandboxes, a ``jupyter lab`` started by
hand), with nothing for the course to install outside pip.

Kernels built by zig run on one thread: clang's OpenMP needs LLVM's runtime, and neither
ziglang's nor torch's wheel (GNU's ``libgomp``) ships it. Every kernel also includes
``Python.h`` (Inductor loads it as a small extension module), which no pip package
provides: a Python without its headers (Debian's before ``python3-dev``) is named as
missing. This module imports only the standard library, so ``./course`` can ask it what
to install before anything is installed.
"""
from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

WRAPPER = Path(__file__).with_name("zig-clang++")
ZIG_VARIABLE = "CXX_TOOLCHAIN_ZIG"   # where zig-clang++ finds zig
# zig builds its C++ runtime (libc++, compiler-rt, glibc stubs) once per target into this
# cache, then reuses it; kernels' own objects go to the local cache beside it.
ZIG_CACHE_VARIABLE = "ZIG_GLOBAL_CACHE_DIR"
ZIG_LOCAL_CACHE_VARIABLE = "ZIG_LOCAL_CACHE_DIR"
# Platforms where ziglang's wheel and the wrapper were tried (see README); elsewhere
# the course asks for a system compiler instead.
ZIG_PLATFORMS = {("Linux", "x86_64")}


@dataclass(frozen=True)
class Toolchain:
    kind: str          # "system", "zig" or "missing"
    compiler: str      # what Inductor runs ("" when missing)
    description: str   # one line, English, for reports and CLIs
    remedy: str = ""   # when missing: what to install, in Chinese and English


def default_compiler() -> str:
    """Inductor's own choice when nothing is configured (torch._inductor.config.cpp.cxx)."""
    return os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")


def system_compiler() -> str | None:
    """The system compiler Inductor would run, if it is there and can run."""
    found = shutil.which(default_compiler())
    if found is None:
        return None
    if sys.platform == "darwin" and Path(found).parent == Path("/usr/bin"):
        # /usr/bin/clang++ is a shim that only asks to install the command-line tools
        try:
            subprocess.run(["xcode-select", "-p"], capture_output=True, check=True)
        except (OSError, subprocess.CalledProcessError):
            return None
    return found


def zig_executable() -> Path | None:
    """zig from the ziglang wheel, found without importing it."""
    spec = importlib.util.find_spec("ziglang")
    if spec is None or spec.origin is None:
        return None
    zig = Path(spec.origin).with_name("zig")
    return zig if os.access(zig, os.X_OK) else None


def zig_supported() -> bool:
    return (platform.system(), platform.machine()) in ZIG_PLATFORMS


def python_header() -> Path:
    """The ``Python.h`` that every Inductor CPU kernel includes."""
    return Path(sysconfig.get_paths()["include"]) / "Python.h"


def current() -> Toolchain:
    """What a torch.compile in this environment compiles with."""
    if not python_header().is_file():
        return Toolchain("missing", "", f"no Python headers: {python_header()} is missing", headers_hint())
    system = system_compiler()
    if system is not None:
        return Toolchain("system", system, f"system C++ compiler {system}")
    zig = zig_executable()
    if zig is not None and zig_supported():
        return Toolchain("zig", str(WRAPPER), f"zig's clang from pip ({zig}); kernels run on one thread")
    return Toolchain("missing", "", f"no C++ compiler: {default_compiler()} is not installed", install_hint())


def zig_cache_dir() -> Path:
    """zig's global cache, resolved the way zig resolves it."""
    if os.environ.get(ZIG_CACHE_VARIABLE):
        return Path(os.environ[ZIG_CACHE_VARIABLE])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "zig"


def install_command() -> str:
    """The command that installs a system C++ compiler here."""
    if sys.platform == "darwin":
        return "xcode-select --install"
    return "sudo apt-get install g++"


def install_hint() -> str:
    """What to install for a system compiler, in Chinese and English (CLIs)."""
    if sys.platform == "darwin":
        return f"请安装 Xcode 命令行工具 (install the Xcode command-line tools): {install_command()}"
    return f"请安装 C++ 编译器 (install a C++ compiler): {install_command()} (Fedora: sudo dnf install gcc-c++)"


def headers_hint() -> str:
    """What to install for this Python's C headers, in Chinese and English (CLIs)."""
    version = "%d.%d" % sys.version_info[:2]
    return (f"请安装 Python {version} 的 C 头文件 (install the C headers of Python {version}): "
            f"sudo apt-get install python{version}-dev (Fedora: sudo dnf install python3-devel)，"
            f"或者改用自带头文件的 Python（uv、conda、python.org 的安装包），用 PYTHON=/path/to/python3 指定")


def missing_message() -> str:
    """What a learner reads when a compile fails for want of a compiler or of Python.h."""
    if not python_header().is_file():
        return (f"这个 Python 没有 C 头文件（{python_header()} 不存在）：Inductor 把每个 CPU 内核编译成一个小的 "
                f"Python 扩展模块，所以 torch.compile 无法运行。{headers_hint()}。")
    if sys.platform == "darwin":
        remedy = f"请安装 Xcode 命令行工具：{install_command()}。"
    else:
        remedy = f"请安装：{install_command()}（Fedora：sudo dnf install gcc-c++）。"
        if zig_supported():
            remedy = "重新运行 ./course，它会从 pip 装好 zig 的 clang；也可以安装系统的编译器：" + remedy[len("请安装："):]
    return (f"本机没有 C++ 编译器（找不到 {default_compiler()}）：Inductor 在 CPU 上要把生成的 C++ 内核编译成共享库，"
            f"所以 torch.compile 无法运行。{remedy}")


def compiler_missing(error: BaseException | None) -> bool:
    """Whether ``error`` (or what caused it) is Inductor not finding a C++ compiler."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if type(error).__name__ == "InvalidCxxCompiler":
            return True
        if type(error).__name__ == "CppCompileError" and re.search(r"'Python\.h' file not found|Python\.h: No such file",
                                                                  str(error)):
            return True
        if isinstance(error, OSError) and default_compiler() in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _use_zig(config) -> None:
    """Point ``torch._inductor.config`` at zig-clang++, with code generated for one thread."""
    config.cpp.cxx = (str(WRAPPER),)
    config.cpp.threads = 1


def _autoload() -> None:
    """The ``torch.backends`` entry point: runs inside every ``import torch``, so it must be
    cheap (a PATH lookup) and never raise (torch's import would fail). Only without a system
    compiler does it do anything: Inductor's config is set when Inductor first imports it."""
    try:
        toolchain = current()
        if toolchain.kind == "zig":
            from .after_import import after_import

            os.environ[ZIG_VARIABLE] = str(zig_executable())
            # beside the global cache (private to the user: a fixed folder under /tmp could be
            # another user's), and not in what a grading sandbox copies
            global_cache = zig_cache_dir()
            local_cache = global_cache.with_name(f"{global_cache.name}-local")
            os.environ.setdefault(ZIG_LOCAL_CACHE_VARIABLE, str(local_cache))
            after_import("torch._inductor.config", _use_zig)
        elif toolchain.kind == "missing":
            from .notebook_message import explain_in_notebooks

            explain_in_notebooks(compiler_missing, missing_message)
    except Exception as error:  # noqa: BLE001 -- a course helper must never break import torch
        warnings.warn(f"cxx_toolchain could not set up Inductor's C++ compiler: {error!r}", stacklevel=2)
