"""Toy chip benchmark: one transformer-block training step, eager vs lazy vs compiled vs Inductor.

Run: ``python benchmarks/toychip_transformer.py``. Prints the table and writes it to
``benchmarks/toychip_transformer.md``. Not a test: the goal it reports (compiled <= 0.75x
and lazy <= 0.7x the eager simulated time, gradients equal to the CPU's within 1e-5
relative) is a performance target for the chip's graph modes. Deterministic: the times
are the simulated clock's (:mod:`toychip.clock`), the same on every machine. The warm-up's
wall-clock time (compilation happens there) is this machine's, with a cold Inductor cache.

The model is chapter 08's capstone block (``course_models.ch08_models.TransformerBlockLM``,
softmax, matmuls, LayerNorm and GELU as separate ops) at larger sizes; the capstone trains
it with the learner's own stack.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

import toychip
from course_models.ch08_models import block_workload
from toychip import fallback, loops

OUT = Path(__file__).with_name("toychip_transformer.md")
SIZES = {"batch": 4, "seq": 32, "d_model": 64, "heads": 4, "ff": 256, "vocab": 256}
WARMUP_STEPS = 2  # compile, trace caching and optimiser-state creation happen here
MODES = ("eager", "lazy", "compiled", "inductor")
GOALS = {"lazy": 0.7, "compiled": 0.75}
COMPILE_BACKENDS = {"compiled": "toychip", "inductor": "inductor"}
GRAD_TOLERANCE = 1e-5


def workload(device: str):
    """The seeded model, its AdamW optimiser and one batch, on ``device``."""
    return block_workload(device, SIZES)


def training_step(mode: str):
    """``step()`` for ``mode`` (forward, backward, optimiser step) and its model.

    Compiled and inductor: the model with its loss is one ``torch.compile`` region (AOTAutograd
    makes its forward and backward graphs) and ``optimizer.step`` a second one, with the
    course's backend (``backend="toychip"``) or the default one (Inductor, the chip registered
    with it: :mod:`toychip.inductor`); lazy: the whole step is recorded and runs at
    ``mark_step``; eager and cpu: op by op.
    """
    model, optimizer, x, targets = workload("cpu" if mode == "cpu" else "toychip")
    loss_fn, optimizer_step = model, optimizer.step
    if mode in COMPILE_BACKENDS:
        torch._dynamo.reset()
        loss_fn = torch.compile(model, backend=COMPILE_BACKENDS[mode])
        optimizer_step = torch.compile(optimizer.step, backend=COMPILE_BACKENDS[mode])
    context = toychip.lazy if mode == "lazy" else contextlib.nullcontext

    def step():
        with context():
            optimizer.zero_grad()
            loss_fn(x, targets).backward()
            optimizer_step()
            if mode == "lazy":
                toychip.mark_step()

    return step, model


@dataclass
class Row:
    """One mode's measured step."""

    mode: str
    time_us: float
    launches: int
    copies: int
    chip_ops: int       # ATen ops computed by chip kernels (a fused kernel counts each of its ops)
    fallbacks: Counter  # ATen ops run through the CPU fallback, by name
    grad_error: float   # max over parameters of max|grad - cpu grad| / max|cpu grad|
    warmup_s: float     # wall-clock seconds of the warm-up steps (compilation happens there)
    kernels: dict       # kernel name -> launches in the step

    @property
    def cpu_ops(self) -> int:
        return sum(self.fallbacks.values())

    @property
    def native_share(self) -> float:
        return self.chip_ops / (self.chip_ops + self.cpu_ops)


def ops_in_kernel(name: str) -> int:
    """ATen ops one launch of kernel ``name`` computes: an Inductor kernel states them
    (:data:`toychip.loops.ATEN_OPS`), the course's fused kernels list them with ``->``."""
    return loops.ATEN_OPS.get(name) or name.removeprefix("fused: ").count(" -> ") + 1


def final_gradients(mode: str) -> list[torch.Tensor]:
    """Gradients of the last of ``WARMUP_STEPS + 1`` steps, on the CPU (no profiling)."""
    step, model = training_step(mode)
    for _ in range(WARMUP_STEPS + 1):
        step()
    return [p.grad.detach().cpu() for p in model.parameters()]


def measure(mode: str, reference: list[torch.Tensor]) -> Row:
    """Warm up, profile one step, and compare its gradients with ``reference``."""
    step, model = training_step(mode)
    started = time.perf_counter()
    for _ in range(WARMUP_STEPS):
        step()
    warmup_s = time.perf_counter() - started
    fallbacks_before = Counter(fallback.FALLBACK_COUNTS)
    with toychip.profile() as p:
        step()
    fallbacks = fallback.FALLBACK_COUNTS - fallbacks_before
    chip_ops = sum(ops_in_kernel(name) * stat.calls for name, stat in p.kernels.items()
                   if not name.startswith("copy:"))
    grads = [q.grad.detach().cpu() for q in model.parameters()]
    error = max(float((g - r).abs().max() / r.abs().max()) for g, r in zip(grads, reference))
    kernels = {name: stat.calls for name, stat in p.kernels.items() if not name.startswith("copy:")}
    return Row(mode, p.time_us, p.launches, p.copies, chip_ops, fallbacks, error, warmup_s, kernels)


def table(rows: list[Row]) -> str:
    eager = rows[0].time_us
    lines = ["| mode | simulated µs | × eager | goal | launches | copies | chip ops / CPU-fallback ops "
             "| native share | max rel. grad error vs CPU | warm-up wall s |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        ratio = row.time_us / eager
        goal = GOALS.get(row.mode)
        verdict = "—" if goal is None else f"≤ {goal} {'met' if ratio <= goal else 'MISSED'}"
        lines.append(f"| {row.mode} | {row.time_us:.1f} | {ratio:.3f} | {verdict} | {row.launches} | "
                     f"{row.copies} | {row.chip_ops} / {row.cpu_ops} | {row.native_share:.1%} | "
                     f"{row.grad_error:.1e} {'ok' if row.grad_error <= GRAD_TOLERANCE else 'TOO LARGE'} | "
                     f"{row.warmup_s:.1f} |")
    return "\n".join(lines)


def fallback_list(rows: list[Row]) -> str:
    return "\n".join(f"* {row.mode}: " + (", ".join(f"`{op}` x{n}" for op, n in sorted(row.fallbacks.items()))
                                          or "none") for row in rows)


def kernel_families(row: Row) -> str:
    """A step's launches by family: the optimiser's generated kernels (Inductor names a kernel
    after the ATen ops it fuses, ``_foreach_*`` for the optimiser's), the forward/backward's
    generated kernels, and the chip's library kernels (matmuls through ``extern_kernels``)."""
    families = Counter()
    for name, calls in row.kernels.items():
        if name in loops.ATEN_OPS:
            families["optimiser step, generated" if "_foreach_" in name else "forward/backward, generated"] += calls
        else:
            families[f"library: `{name}`"] += calls
    return ", ".join(f"{family} {calls}" for family, calls in families.most_common())


def report(rows: list[Row]) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in SIZES.items())
    inductor = next(row for row in rows if row.mode == "inductor")
    return f"""# Toy chip: one transformer-block training step, eager vs lazy vs compiled vs Inductor

Generated by `benchmarks/toychip_transformer.py` (regenerate: `python benchmarks/toychip_transformer.py`).
Times are **simulated** microseconds on the toy chip's clock (`toychip.profile()`,
`ChipSpec` defaults: {toychip.DEFAULT_SPEC.launch_us:g} µs per launch, 200 GB/s, 10 TFLOP/s, a host link of
{toychip.DEFAULT_SPEC.copy_us:g} µs per copy plus 16 GB/s):
deterministic and machine-independent, not wall-clock time. The last column is wall-clock
time of the {WARMUP_STEPS} warm-up steps (compilation, caching) on the machine that ran it
({os.cpu_count()} CPU cores), with a cold Inductor cache.

{table(rows)}

Inductor's launches in the measured step: {kernel_families(inductor)}.
Where it differs from the course's backend (`compiled`): Inductor fuses a reduction with the
pointwise ops around it (LayerNorm and its backward, softmax, the loss) into one kernel, where
the course's scheduler fuses pointwise chains and matmul epilogues only; and each parameter's
whole AdamW update (every `_foreach_` op of it) is one kernel, where the course's backend
launches three per parameter. What Inductor does not do on the chip: fuse the updates of
different parameters into one launch (its combo kernels, `torch._inductor.config.combo_kernels`,
are off by default and Triton-only) or fuse into a matmul (`mm`, `bmm`, `addmm` stay
`extern_kernels` calls into the chip's library). Split reductions, which spread one
reduction over a GPU's SMs, are off at the default `ChipSpec.compute_units` = 1 (on a clock
that runs one kernel at a time they would only add launches), and multi-dimensional tiling
is always off (`NumpyScheduling.select_tiling`): one block per kernel.

CPU-fallback ops in the measured step:

{fallback_list(rows)}

Eager `gelu` / `gelu_backward` stay CPU fallbacks on purpose: chapter 07's exercise is to
write that kernel (the graph modes build GELU from chip kernels, `toychip.decompositions`).
`cat` (the backward of the q/k/v `split`) has no chip kernel; chapter 07's boxed-fallback
exercise relies on it falling back. Inductor needs none: it generates both as NumPy kernels.

Protocol: a pre-LN transformer block ({sizes}; attention written out with
matmul + softmax, LayerNorm, GELU MLP, vocabulary head, cross-entropy) trained with AdamW
(lr 1e-3, weight decay 0.01, PyTorch's default foreach implementation), float32, seed 0.
One step is `zero_grad`, forward + loss, `backward`, `optimizer.step` — the optimiser step
is inside the measured step in every mode. Eager: op by op on the chip. Lazy: the whole
step recorded under `toychip.lazy()` and run at `mark_step()`. Compiled: the model with
its loss is one `torch.compile(backend="toychip")` region (forward and backward graphs)
and `optimizer.step` a second compiled region. Inductor: the same two regions with the
default `torch.compile` (Inductor, which the chip registers with: `toychip.inductor`). {WARMUP_STEPS} warm-up steps (compilation,
trace caching, optimiser state) run first; the next step is profiled.

Columns: launches and host<->device copies counted by the profile; "chip ops" are the
ATen ops computed by chip kernels in the step (a fused kernel counts each op it fuses; an
Inductor kernel counts the graph nodes it was generated from, and a `_foreach_` node, which
covers every parameter, counts once in each parameter's kernel),
"CPU-fallback ops" those run through the CPU fallback. The gradient error compares the
profiled step's gradients with a CPU run of the same {WARMUP_STEPS + 1} steps: for each
parameter max|grad - cpu grad| / max|cpu grad|, the largest over parameters (goal ≤ {GRAD_TOLERANCE:g}).
"""


def main() -> None:
    # A cold Inductor cache, so that the warm-up column shows compilation (the course's own
    # backend caches nothing on disk).
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="toychip-bench-inductor-")
    reference = final_gradients("cpu")
    rows = [measure(mode, reference) for mode in MODES]
    text = report(rows)
    print(text)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
