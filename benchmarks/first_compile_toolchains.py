"""First compile, and the compiled kernel's speed, with the C++ compiler Inductor uses here: g++, or zig's clang from pip.

Each run is a fresh Python process with an empty Inductor cache that times the first call
of a compiled function (after `import torch`). With zig there are two cases: its C++
runtime already built (what ./course leaves behind) and built during the call (an empty
zig cache). Run it once as is and once under `.ci/without-compilers` (root) to compare;
results are in first_compile_toolchains.md.

    .venv/bin/python benchmarks/first_compile_toolchains.py [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import cxx_toolchain
from benchmarking import describe_hardware

FIRST_CALL = """
import statistics, time, torch
x = torch.randn(4096, 4096)
compiled = torch.compile(lambda t: (torch.sin(t) + 1).relu().softmax(-1))
started = time.perf_counter()
compiled(x)
first = time.perf_counter() - started
calls = []
for _ in range(20):
    started = time.perf_counter()
    compiled(x)
    calls.append(time.perf_counter() - started)
print(first, statistics.median(calls))
"""


def first_and_later_call_s(extra_env: dict) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, **extra_env}
        out = subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, capture_output=True, text=True, check=True)
        first, later = out.stdout.split()[-2:]
        return float(first), float(later)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    toolchain = cxx_toolchain.current()
    print(f"{describe_hardware()}\ncompiler: {toolchain.description}")
    cases = {"zig's runtime already built" if toolchain.kind == "zig" else "system compiler": False}
    if toolchain.kind == "zig":
        cases["empty zig cache"] = True
    for name, empty_zig_cache in cases.items():
        firsts, laters = [], []
        for run in range(runs):
            print(f"  {name}: run {run + 1}/{runs}", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory() as zig_cache:
                env = {cxx_toolchain.ZIG_CACHE_VARIABLE: zig_cache} if empty_zig_cache else {}
                first, later = first_and_later_call_s(env)
            firsts.append(first)
            laters.append(later)
        print(f"{name}: first call median {statistics.median(firsts):.1f} s "
              f"(runs: {', '.join(f'{t:.1f}' for t in firsts)}); later calls median "
              f"{statistics.median(laters) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
