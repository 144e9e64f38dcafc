"""Toy chip benchmark: simulated time per mode, the C++ runtime's build, per-op eager
overhead, fused-kernel speed.

Run: ``python benchmarks/toychip_bench.py``. Prints tables; not a test. Simulated numbers
are deterministic (same on every machine); wall-clock numbers are medians on this host.
Recorded output, with the machine: benchmarks/toychip_bench.md.
"""
from __future__ import annotations

import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import toychip


def make_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def batch():
    torch.manual_seed(1)
    return torch.randn(64, 256).to("toychip"), torch.randint(0, 10, (64,)).to("toychip")


def simulated(mode: str, training: bool, repeats: int = 3):
    """Profile of the last of ``repeats`` steps (the first compiles / fills caches)."""
    model = make_mlp().to("toychip")
    x, y = batch()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch._dynamo.reset()

    def loss_fn(inputs, targets):
        return F.cross_entropy(model(inputs), targets)

    def opt_step():
        opt.step()

    if mode == "compiled":  # the model + loss, and the optimiser step, each one graph
        loss_fn = torch.compile(loss_fn, backend="toychip")
        opt_step = torch.compile(opt_step, backend="toychip")
    context = toychip.lazy if mode == "lazy" else contextlib.nullcontext

    def step():
        with context():
            if training:
                opt.zero_grad()
                loss = loss_fn(x, y)
                loss.backward()
                opt_step()
            else:
                with torch.no_grad():
                    loss = loss_fn(x, y)
        return loss.item()

    for _ in range(repeats - 1):
        step()
    with toychip.profile() as p:
        step()
    return p


def per_op_overhead_us(n: int = 3000) -> tuple[float, float]:
    a = torch.randn(16).to("toychip")
    b = torch.randn(16).to("toychip")
    ac, bc = a.cpu(), b.cpu()

    def median(fn):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e6

    return median(lambda: torch.add(a, b)), median(lambda: torch.add(ac, bc))


def runtime_build_seconds() -> float:
    """A build of the chip's C++ runtime from scratch (an empty build folder), as the first
    ``import toychip`` on a machine makes it: the seconds its last line reports."""
    with tempfile.TemporaryDirectory() as build_dir:
        done = subprocess.run([sys.executable, "-m", "toychip.runtime_build"], capture_output=True, text=True,
                              env={**os.environ, "TOYCHIP_BUILD_DIR": build_dir}, check=True)
    return float(re.search(r"runtime built in (\d+) s", done.stderr).group(1))


def chain(x):
    return torch.relu((x + 1.0) * 2.0 - 0.5)


def fused_chain_wall_ms(numel: int = 4_000_000, repeats: int = 7) -> dict:
    x = torch.randn(numel).to("toychip")
    torch._dynamo.reset()
    compiled = torch.compile(chain, backend="toychip")
    compiled(x)

    def lazy_chain(v):
        with toychip.lazy():
            out = chain(v)
        return out

    lazy_chain(x)
    results = {}
    for name, fn in [("eager (4 kernels)", chain), ("lazy (1 fused kernel)", lazy_chain),
                     ("compiled (1 fused kernel)", compiled)]:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t0)
        results[name] = statistics.median(times) * 1e3
    return results


def main() -> None:
    print("== Simulated time, MLP 64x256 -> 512 -> 512 -> 10 (ChipSpec defaults) ==")
    print(f"{'workload':<22} {'mode':<9} {'sim us':>10} {'x eager':>8} {'launches':>9} {'copies':>7}")
    for training, label in [(True, "train step (Adam)"), (False, "inference")]:
        eager = None
        for mode in ("eager", "lazy", "compiled"):
            p = simulated(mode, training)
            eager = eager or p.time_us
            print(f"{label:<22} {mode:<9} {p.time_us:>10.1f} {p.time_us / eager:>8.2f} "
                  f"{p.launches:>9} {p.copies:>7}")
    print(f"\n== The C++ runtime: a build from scratch ({os.cpu_count()} cores) ==")
    print(f"{runtime_build_seconds():.0f} s")
    chip_us, cpu_us = per_op_overhead_us()
    print("\n== Wall clock: per-op eager overhead, add of 16 floats (median) ==")
    print(f"toychip eager: {chip_us:.2f} us   (budget 15 us)   CPU eager: {cpu_us:.2f} us")
    print("\n== Wall clock: relu((x + 1) * 2 - 0.5) on 4M floats (median ms) ==")
    for name, ms in fused_chain_wall_ms().items():
        print(f"{name:<28} {ms:>8.2f} ms")


if __name__ == "__main__":
    main()
