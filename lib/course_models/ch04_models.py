"""Programs for chapter 04 (Lazy Tensor), and the one place that touches real LTC.

* :func:`run_program` interprets a *program*: a list of plain-data steps, so the grader
  can draw random programs from a seed and ship them to the sandbox (a ``partial`` of a
  module-level function pickles; a closure would not). Every value an output does not
  need is dead code -- what a lazy recorder must not run. :class:`Program` wraps one as
  a module, for FX tracing.
* :func:`lazy_sgd` trains a tiny regressor in toychip lazy mode over a schedule of
  (learning rate, batch size) steps, and :func:`lazy_programs` runs one program per
  step: the workloads of the trace-cache exercise.
* :data:`PROBE_OPS` are one-tensor operations for the barrier-probe exercise: some
  record, some make lazy mode materialise, for reasons a table of op properties misses.
* :func:`init_ltc` starts PyTorch's own Lazy Tensor Core with its TorchScript backend,
  once per process (a second ``torch._lazy.ts_backend.init()`` raises);
  :func:`backend_interface_methods` and :func:`lazy_dispatch_entry` read what a backend
  implements and how the dispatcher serves each op on a lazy tensor.
* :func:`xla_reference` is what PyTorch/XLA made of this chapter's examples, recorded
  where torch_xla installs (it is not in the course's environment).
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

UNARY = ("relu", "sigmoid", "tanh", "neg", "abs")
SCALES = (0.5, 2.0, -1.5)
FAN_WIDTH = 8  # products per random ``fan`` step


def run_program(steps, x: torch.Tensor, w: torch.Tensor, outputs=-1):
    """Run ``steps`` on ``x`` (n×n, or rows×n) and ``w`` (n×n); returns ``values[outputs]``
    (by default the last value), or a tuple of values when ``outputs`` is a tuple of indices.

    Each step appends one value, reading earlier ones by index (``values[0]`` is ``x``):
    ``("unary", name, i)``, ``("scale", c, i)`` (times a float), ``("shift", k, i)`` (plus
    an int), ``("div", mode, i)`` (``torch.div(values[i], 0.25, rounding_mode=mode)``: a
    keyword string), ``("matmul", i)`` (``values[i] @ w``), ``("add", i, j)``, ``("axpy", c, i, j)``
    (``torch.add(values[i], values[j], alpha=c)``: a keyword constant), ``("stack", i, j)``
    (the two values broadcast, stacked and summed: ``stack`` reads a list of tensors),
    ``("fan", coeffs, i)`` (``torch.stack([values[i] * c for c in coeffs]).sum(dim=0)``: the
    products are temporaries, freed as soon as the step is done),
    ``("sum", i)`` (over rows, kept as 1×n), ``("reduce", d, i)`` (over dim ``d``, dropped),
    ``("max", i)`` (column maxima, 1×n, from ``torch.max``'s (values, indices) pair).
    """
    values = [x]
    for step in steps:
        values.append(_run_step(step, values, w))
    if isinstance(outputs, int):
        return values[outputs]
    return tuple(values[i] for i in outputs)


def _run_step(step, values, w):
    """The value of one step; its last element indexes its main operand."""
    kind, v = step[0], values[step[-1]]
    if kind == "unary":
        return getattr(torch, step[1])(v)
    if kind == "scale":
        return v * step[1]
    if kind == "shift":
        return v + step[1]
    if kind == "div":
        return torch.div(v, 0.25, rounding_mode=step[1])
    if kind == "matmul":
        return v @ w
    if kind == "add":
        return values[step[1]] + v
    if kind == "axpy":
        return torch.add(values[step[2]], v, alpha=step[1])
    if kind == "stack":
        return torch.stack(torch.broadcast_tensors(values[step[1]], v)).sum(dim=0)
    if kind == "fan":
        return torch.stack([v * c for c in step[1]]).sum(dim=0)
    if kind == "sum":
        return v.sum(dim=0, keepdim=True)
    if kind == "reduce":
        return v.sum(dim=step[1])
    if kind == "max":
        return torch.max(v, dim=0, keepdim=True).values
    raise ValueError(f"unknown step {step!r}")


class Program(nn.Module):
    """``run_program(steps, x, w)`` as a module whose forward returns a 1-tuple, like the
    graphs Dynamo hands to a backend; ``torch.fx.symbolic_trace`` turns it into one."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def forward(self, x, w):
        return (run_program(self.steps, x, w),)


def random_program(rng: random.Random, length: int, kinds=("unary", "scale", "matmul", "add", "sum"),
                   weights=(5, 4, 1, 2, 1)) -> list[tuple]:
    """A random program of ``length`` steps; operands are drawn from recent values, so
    some values end up unused (dead)."""
    steps = []
    for n in range(1, length + 1):
        kind = rng.choices(kinds, weights)[0]
        a = rng.randrange(max(0, n - 3), n)
        if kind == "unary":
            steps.append(("unary", rng.choice(UNARY), a))
        elif kind == "scale":
            steps.append(("scale", rng.choice(SCALES), a))
        elif kind in ("add", "stack"):
            steps.append((kind, rng.randrange(max(0, n - 4), n), a))
        elif kind == "axpy":
            steps.append(("axpy", rng.choice(SCALES), rng.randrange(max(0, n - 4), n), a))
        elif kind == "fan":
            steps.append(("fan", tuple(rng.choice(SCALES) for _ in range(FAN_WIDTH)), a))
        else:
            steps.append((kind, a))
    return steps


# --------------------------------------------------------------------------- lazy SGD
def make_regressor(seed: int = 0) -> nn.Module:
    """Linear(4, 8) → tanh → Linear(8, 2): small enough to train in milliseconds."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def lazy_sgd(schedule, cache_key=None, seed: int = 0) -> dict:
    """Train in toychip lazy mode, one step per ``(lr, batch_size)`` of ``schedule``.

    Returns the trace-cache counters and the losses (read once, after the last step, so
    reading them adds no barrier).
    """
    import toychip
    from toychip import lazy_tensor

    model = make_regressor(seed).to("toychip")
    generator = torch.Generator().manual_seed(seed + 1)
    lazy_tensor.clear_cache()
    toychip.reset_lazy_metrics()
    losses = []
    for lr, batch in schedule:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        x = torch.randn(batch, 4, generator=generator).to("toychip")
        y = torch.randn(batch, 2, generator=generator).to("toychip")
        with toychip.lazy(cache_key=cache_key):
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            toychip.mark_step()
        losses.append(loss)
    return {**_cache_counters(), "losses": [loss.item() for loss in losses]}


def lazy_programs(runs, cache_key=None, seed: int = 0) -> dict:
    """Run programs in toychip lazy mode, one graph (one ``mark_step``) per run.

    Each run is ``(steps, rows, dtype, outputs)``: ``run_program(steps, x, w, outputs)``
    with ``x`` rows×4 and ``w`` 4×4 of dtype ``dtype`` (a name, e.g. ``"float64"``); every
    value in ``outputs`` is kept alive until the graph has run (a graph output). Returns
    the trace-cache counters.
    """
    import toychip
    from toychip import lazy_tensor

    generator = torch.Generator().manual_seed(seed)
    lazy_tensor.clear_cache()
    toychip.reset_lazy_metrics()
    for steps, rows, dtype, outputs in runs:
        x, w = (torch.randn(shape, generator=generator, dtype=getattr(torch, dtype)).to("toychip")
                for shape in ((rows, 4), (4, 4)))
        with toychip.lazy(cache_key=cache_key):
            kept = run_program(steps, x, w, outputs)  # alive at mark_step: graph outputs
            toychip.mark_step()
    return _cache_counters()


def _cache_counters() -> dict:
    import toychip

    metrics = toychip.lazy_metrics()
    return {"misses": metrics.cache_misses, "hits": metrics.cache_hits, "false_hits": metrics.false_hits}


# --------------------------------------------------------------------------- barrier probes
PROBE_OPS = {
    # what the section lists
    "item": lambda t: t * t.sum().item(),
    "cpu": lambda t: t.cpu(),
    "mask": lambda t: t[t > 0],
    "cumsum": lambda t: torch.cumsum(t, dim=0),
    "relu": torch.relu,
    # never listed: decomposed, recorded in place, written in part, cast, printed, two barriers
    "gelu": F.gelu,
    "softmax": lambda t: torch.softmax(t, dim=1),
    "silu": F.silu,
    "layer_norm": lambda t: F.layer_norm(t, (t.shape[-1],)),
    "transpose_matmul": lambda t: t.t() @ t,
    "scale_in_place": lambda t: t.mul_(2.0),
    "tolist": lambda t: t.tolist(),
    "unique": torch.unique,
    "where": lambda t: torch.where(t > 0),
    "truth_value": lambda t: t * 2.0 if bool(t.sum() > 0) else t,
    "flip": lambda t: torch.flip(t, [0]),
    "sort": lambda t: torch.sort(t, dim=1).values,
    "topk": lambda t: torch.topk(t, 2).values,
    "std": lambda t: t.std(),
    "concat": lambda t: torch.cat([t, t]),
    "row_add": lambda t: t[0].add_(1.0),
    "column_fill": lambda t: t[:, 0].fill_(0.0),
    "to_float64": lambda t: t.to(torch.float64) * 2.0,
    "printed": lambda t: str(t * 2.0),
    "cumsum_then_item": lambda t: torch.cumsum(t, dim=0).sum().item(),
    "item_then_flip": lambda t: torch.flip(t * t.sum().item(), [0]),
}
SECTION_PROBE_OPS = ("item", "cpu", "mask", "cumsum", "relu")


# --------------------------------------------------------------------------- real LTC
def init_ltc() -> None:
    """Start LTC's TorchScript backend (CPU) unless this process already did."""
    import torch._lazy
    import torch._lazy.ts_backend

    try:
        torch._lazy.ts_backend.init()
    except RuntimeError as error:
        if "multiple backend fallbacks" not in str(error):
            raise


HEADER_SECTION = re.compile(r"/\*\*\s*\n\s*\*\s*(.+?)\s*\n\s*\*\s*\*/")  # /**  * Title  * */
VIRTUAL_METHOD = re.compile(r"^\s*virtual\s[^;{]*?\b(\w+)\(", re.MULTILINE)


def backend_interface_methods() -> dict[str, list[str]]:
    """The virtual methods of ``torch::lazy::BackendImplInterface``, grouped by the section
    comments of the header that the installed torch ships: what a backend implements."""
    header = Path(torch.__file__).parent / "include" / "torch" / "csrc" / "lazy" / "backend" / "backend_interface.h"
    body = header.read_text(encoding="utf-8").split("class TORCH_API BackendImplInterface {")[1].split("\n};")[0]
    parts = HEADER_SECTION.split(body)  # [preamble, title, block, title, block, ...]
    return {title: list(dict.fromkeys(VIRTUAL_METHOD.findall(block))) for title, block in zip(parts[1::2], parts[2::2])}


def lazy_dispatch_entry(op_name: str) -> tuple[str, str]:
    """How the dispatcher serves ``op_name`` (e.g. ``"aten::relu"``) on a lazy tensor: the
    kind of its ``Lazy`` entry (``kernel``, ``math kernel`` or ``backend fallback``) and
    the file that registered it."""
    line = next(line for line in torch._C._dispatch_dump_table(op_name).splitlines() if line.startswith("Lazy:"))
    kind = line[line.rindex("[") + 1:line.rindex("]")]
    source = line.split(" registered at ")[1].split(":")[0].rsplit("/", 1)[-1]
    return kind, source


# --------------------------------------------------------------------------- recorded XLA
XLA_REFERENCE = Path(__file__).resolve().parents[2] / "assets" / "xla" / "ch04_xla_reference.json"


def xla_reference() -> dict:
    """What PyTorch/XLA made of this chapter's examples: the IR and HLO of the seed chain,
    an out-of-range ``gather``, the fallback counters of ``det``. Recorded by
    ``benchmarks/record_xla_ch04.py`` with a matching torch/torch_xla pair, since
    torch_xla is released for one torch version at a time and is not in this environment."""
    return json.loads(XLA_REFERENCE.read_text(encoding="utf-8"))
