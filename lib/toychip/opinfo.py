"""The OpInfo sweep: PyTorch's own operator test inputs, run on the chip against the CPU.

Vendors test a port with the OpInfo database (``torch.testing._internal.common_methods_invocations
.op_db``: every public op with sample inputs, the basis of PyTorch's device-generic tests).
:func:`sweep` runs each OpInfo's samples on "toychip" and on the CPU and sorts the op into

* ``native``   -- every sample matched the CPU and every ATen op it reached had a chip kernel,
* ``fallback`` -- every sample matched, but some ATen ops ran on the CPU fallback (named),
* ``failing``  -- a sample raised or differed from the CPU (the reason's first line).

Samples are made on the chip (as PyTorch's device-generic tests make them on the device
under test) and copied to the CPU for the reference. The fallback counters, read around the
chip call alone, tell native from fallback, as :func:`toychip.coverage` does. An output the
CPU does not repeat itself is compared by shape and dtype only; OpInfos that PyTorch's own
device-vs-CPU test skips (mostly random or uninitialised outputs: ``rand_like``, ``empty``) and
those whose samples all fail on the CPU too (CUDA-only OpInfos) are listed as skipped.
Importing op_db needs ``expecttest`` and takes seconds, so it happens on the first sweep.
"""
from __future__ import annotations

import unittest
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .fallback import FALLBACK_COUNTS

STATUSES = ("native", "fallback", "failing")


@dataclass
class OpResult:
    """One OpInfo's verdict; ``fallback_ops`` names the ATen ops that left the chip."""

    name: str
    status: str
    samples: int
    fallback_ops: tuple[str, ...] = ()
    reason: str = ""


@dataclass
class SweepResult:
    """The verdicts, and the OpInfos skipped: not comparable with the CPU, or no sample runs there."""

    rows: list[OpResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        counts = Counter(row.status for row in self.rows)
        return {status: counts[status] for status in STATUSES}

    def by_status(self, status: str) -> list[OpResult]:
        return [row for row in self.rows if row.status == status]

    def markdown(self) -> str:
        """The table (one row per OpInfo) and the totals, as Markdown."""
        lines = ["| OpInfo | status | samples | CPU fallback ops / reason |", "|---|---|---|---|"]
        for row in self.rows:
            detail = row.reason or ", ".join(row.fallback_ops)
            lines.append(f"| {row.name} | {row.status} | {row.samples} | {detail.replace('|', '/')} |")
        totals = self.totals()
        lines += ["", "totals: " + ", ".join(f"{status} {n}" for status, n in totals.items())
                  + f" (swept {len(self.rows)}; skipped, not comparable with the CPU: {len(self.skipped)})"]
        if self.skipped:
            lines.append("skipped: " + ", ".join(self.skipped))
        return "\n".join(lines)


def _to_cpu(value):
    return value.cpu() if isinstance(value, torch.Tensor) else value


def _clone(value):
    return value.clone() if isinstance(value, torch.Tensor) else value


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:160]


def _same_metadata(got, expected) -> None:
    """For outputs the CPU itself does not repeat (random, uninitialised): shapes and dtypes."""
    got_leaves, expected_leaves = tree_flatten(got)[0], tree_flatten(expected)[0]
    assert len(got_leaves) == len(expected_leaves), "different number of outputs"
    for g, e in zip(got_leaves, expected_leaves):
        if isinstance(e, torch.Tensor):
            assert (g.shape, g.dtype) == (e.shape, e.dtype), f"{g.shape} {g.dtype} != {e.shape} {e.dtype}"


class CpuCannotRun(Exception):
    """The sample fails on the CPU too (a CUDA-only OpInfo, ...): not the chip's to pass."""


def _run_sample(opinfo, sample) -> Counter:
    """Run one sample (made on the chip, as device-generic tests do) on the chip and on CPU copies.

    Raises on a chip error or a mismatch; returns the fallback counts of the chip call alone.
    """
    args = (sample.input, sample.args, sample.kwargs)
    cpu_args = [tree_map(_to_cpu, args) for _ in range(2)]
    cpu_args[1] = tree_map(_clone, cpu_args[1])
    try:
        expected = [opinfo(i, *a, **k) for i, a, k in cpu_args]
    except Exception as error:  # noqa: BLE001
        raise CpuCannotRun(_first_line(error)) from error
    before = Counter(FALLBACK_COUNTS)
    got = opinfo(sample.input, *sample.args, **sample.kwargs)
    fell_back = Counter(FALLBACK_COUNTS) - before
    got = tree_map(_to_cpu, got)
    try:
        torch.testing.assert_close(expected[1], expected[0], equal_nan=True)
    except AssertionError:
        _same_metadata(got, expected[0])
    else:
        torch.testing.assert_close(got, expected[0], equal_nan=True, check_device=False)
    return fell_back


def opinfo_name(opinfo) -> str:
    """``name`` or ``name.variant`` (``nn.functional.dropout``, ``as_strided.partial_views``)."""
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


def check_op(opinfo, dtype: torch.dtype = torch.float32, max_samples: int = 4) -> OpResult | None:
    """Classify one OpInfo on up to ``max_samples`` samples; ``None`` if no sample runs on the CPU."""
    name = opinfo_name(opinfo)
    fell_back, samples = Counter(), 0
    try:
        for sample in opinfo.sample_inputs("toychip", dtype, requires_grad=False):
            if samples == max_samples:
                break
            try:
                fell_back += _run_sample(opinfo, sample)
            except CpuCannotRun:
                continue
            samples += 1
    except Exception as error:  # noqa: BLE001 -- any failure is a verdict, not a crash of the sweep
        return OpResult(name, "failing", samples + 1, reason=_first_line(error))
    if samples == 0:
        return None
    return OpResult(name, "fallback" if fell_back else "native", samples, tuple(sorted(fell_back)))


def _not_comparable_with_cpu(opinfo) -> bool:
    """PyTorch's own device-vs-CPU test (``TestCommon.test_compare_cpu``) skips this OpInfo on
    every device: mostly random or uninitialised outputs (``rand_like``, ``dropout``, ``empty``)."""
    return any(d.cls_name == "TestCommon" and d.test_name == "test_compare_cpu" and d.device_type is None
               and any(f is not unittest.expectedFailure for f in d.decorators)
               for d in opinfo.decorators if hasattr(d, "test_name"))


def op_db() -> list:
    """PyTorch's OpInfo database (imported on first use: it needs expecttest)."""
    from torch.testing._internal.common_methods_invocations import op_db as database

    return database


def sweep(ops=None, dtype: torch.dtype = torch.float32, max_samples: int = 4) -> SweepResult:
    """Sweep the OpInfos named in ``ops`` (``name`` or ``name.variant``; ``None``: all) for ``dtype``.

    OpInfos whose CPU dtypes exclude ``dtype`` are left out, as device-generic tests leave them
    out; those PyTorch does not compare with the CPU either are listed in ``skipped``.
    """
    wanted = set(ops) if ops is not None else None
    result = SweepResult()
    for opinfo in op_db():
        name = opinfo_name(opinfo)
        if wanted is not None and name not in wanted and opinfo.name not in wanted:
            continue
        if not opinfo.supports_dtype(dtype, "cpu"):
            continue
        if _not_comparable_with_cpu(opinfo):
            result.skipped.append(name)
            continue
        row = check_op(opinfo, dtype, max_samples)
        if row is None:
            result.skipped.append(name)
        else:
            result.rows.append(row)
    return result
