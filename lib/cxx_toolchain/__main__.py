"""python -m cxx_toolchain [plan | warm]: the C++ compiler Inductor uses here.

  (no argument)  one line: which compiler, and what it means for kernels
  plan           for ./course, before anything is installed: "system" (a system compiler
                 is here), "zig" (there is none; install the toolchain extra) or "none"
                 (no compiler pip can bring here, or no Python.h; what to install goes
                 to stderr, exit status 1)
  warm           build zig's C++ runtime once (about 40 s), so that no notebook cell waits for it
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from . import current, install_hint, missing_message, python_header, zig_cache_dir, zig_supported


def plan() -> int:
    toolchain = current()
    if toolchain.kind == "system":
        print("system")
        return 0
    if python_header().is_file() and zig_supported():
        print("zig")
        return 0
    print("none")
    print(f"错误：{missing_message()}", file=sys.stderr)
    return 1


def compiler_complaint(error: BaseException, most_lines: int = 30) -> str:
    """What went wrong, in the compiler's own words where it spoke: a CppCompileError somewhere
    in the chain Inductor raised carries the compiler's output; its error lines are shown, else
    its last lines. The command line that starts the error's text (thousands of characters of
    flags) is left out: it never says the cause."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(getattr(cause, "output", None), str):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return str(error).strip()[-3000:]
    lines = cause.output.strip().splitlines()
    shown = ([line for line in lines if "error" in line.lower()] or lines)[-most_lines:]
    return "编译器的输出 (compiler output):\n" + "\n".join(shown)


def warm() -> int:
    """Compile one small function with Inductor, in a throw-away Inductor cache: zig builds
    its runtime for exactly the flags Inductor passes."""
    toolchain = current()
    if toolchain.kind != "zig":
        print(f"nothing to warm: {toolchain.description}")
        return 0 if toolchain.kind == "system" else 1
    print("正在为 zig 的编译器构建 C++ 运行库（只需一次，约 40 秒）… (building zig's C++ runtime, once)", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        import torch

        try:
            torch.compile(lambda t: (t.sin() + 1).relu())(torch.randn(8))
        except Exception as error:  # noqa: BLE001 -- said with the compiler's own words and what to do instead
            print(f"错误：zig 没能编译 Inductor 的内核（{type(error).__name__}）。{install_hint()}\n"
                  f"{compiler_complaint(error)}", file=sys.stderr)
            return 1

    print(f"已构建：{zig_cache_dir()}（{time.monotonic() - started:.0f} 秒）。(zig's C++ runtime is ready)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cxx_toolchain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", choices=("plan", "warm"))
    command = parser.parse_args(argv).command
    if command == "plan":
        return plan()
    if command == "warm":
        return warm()
    print(current().description)
    return 0


if __name__ == "__main__":
    sys.exit(main())
