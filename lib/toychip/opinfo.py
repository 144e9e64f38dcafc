"""The OpInfo sweep: PyTorch's own operator test inputs, run on the chip against the CPU.

Vendors test a port with the OpInfo database (``torch.testing._internal.common_methods_invocations
.op_db``: every public op with sample inputs, the basis of PyTorch's device-generic tests).
:func:`sweep` runs each OpInfo's samples on "toychip" and on the CPU in four variants, as
OpenReg's ``tests/test_opinfo.py`` and PyTorch's ``TestCommon`` do:

* ``forward``        -- the sample as given;
* ``noncontiguous``  -- the same values in non-contiguous tensors (``SampleInput.noncontiguous()``);
* ``out``            -- OpInfos that ``supports_out``: results written into ``out=`` tensors, which
  must be returned as they are (same tensors, same memory);
* ``grad``           -- OpInfos that support autograd in the dtype: the inputs' gradients from
  ``torch.autograd.grad`` with a fixed output gradient.

Each (OpInfo, variant) is sorted into

* ``native``   -- every sample matched the CPU and every ATen op it reached had a chip kernel,
* ``fallback`` -- every sample matched, but some ATen ops ran on the CPU fallback (named),
* ``failing``  -- a sample raised or differed from the CPU (the reason's first line; for a
  difference, the greatest absolute difference and the tolerance).

Samples are made on the chip (as PyTorch's device-generic tests make them on the device
under test) and copied to the CPU for the reference with their whole storage, so a view keeps
its storage offset and strides (``as_strided`` reads the storage, not the view). The fallback
counters, read around the chip call alone, tell native from fallback, as
:func:`toychip.coverage` does. An output the CPU does not repeat itself is compared by shape and
dtype only; OpInfos that PyTorch's own device-vs-CPU test skips (mostly random or uninitialised
outputs: ``rand_like``, ``empty``) and those whose samples all fail on the CPU too (CUDA-only
OpInfos) are listed as skipped. Importing op_db needs ``expecttest`` and takes seconds, so it
happens on the first sweep.
"""
from __future__ import annotations

import unittest
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
from torch.utils._pytree import tree_flatten, tree_map

from .fallback import FALLBACK_COUNTS

STATUSES = ("native", "fallback", "failing")
VARIANTS = ("forward", "noncontiguous", "out", "grad")
_HEADINGS = {"forward": "forward", "noncontiguous": "non-contiguous", "out": "out=", "grad": "gradient"}


@dataclass
class OpResult:
    """One OpInfo's verdict in one variant; ``fallback_ops`` names the ATen ops that left the chip."""

    name: str
    status: str
    samples: int
    fallback_ops: tuple[str, ...] = ()
    reason: str = ""
    variant: str = "forward"


@dataclass
class SweepResult:
    """The verdicts, and the OpInfos skipped: not comparable with the CPU, or no sample runs there."""

    rows: list[OpResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def totals(self, variant: str = "forward") -> dict[str, int]:
        counts = Counter(row.status for row in self.rows if row.variant == variant)
        return {status: counts[status] for status in STATUSES}

    def by_status(self, status: str, variant: str = "forward") -> list[OpResult]:
        return [row for row in self.rows if row.status == status and row.variant == variant]

    def variants(self) -> list[str]:
        return [variant for variant in VARIANTS if any(row.variant == variant for row in self.rows)]

    def totals_markdown(self) -> str:
        """One line per variant: how many OpInfos are native, fallback, failing."""
        lines = ["| variant | " + " | ".join(STATUSES) + " | swept |", "|---|---|---|---|---|"]
        for variant in self.variants():
            totals = self.totals(variant)
            lines.append(f"| {_HEADINGS[variant]} | " + " | ".join(str(n) for n in totals.values())
                         + f" | {sum(totals.values())} |")
        return "\n".join(lines)

    def markdown(self) -> str:
        """The totals per variant, then one row per OpInfo (a column per variant), as Markdown."""
        variants = self.variants()
        by_name: dict[str, dict[str, OpResult]] = {}
        for row in self.rows:
            by_name.setdefault(row.name, {})[row.variant] = row
        lines = [self.totals_markdown(), "",
                 "| OpInfo | " + " | ".join(_HEADINGS[v] for v in variants) + " | CPU fallback ops / reason |",
                 "|---|" + "---|" * (len(variants) + 1)]
        for name, results in by_name.items():
            cells = [f"{results[v].status} {results[v].samples}" if v in results else "-" for v in variants]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {_detail(results).replace('|', '/')} |")
        lines += ["", f"skipped, not comparable with the CPU: {len(self.skipped)}"]
        if self.skipped:
            lines.append("skipped: " + ", ".join(self.skipped))
        return "\n".join(lines)


def _detail(results: dict[str, OpResult]) -> str:
    """The first failing variant's reason, else the fallback ops of all variants."""
    for variant, row in results.items():
        if row.reason:
            return row.reason if variant == "forward" else f"{_HEADINGS[variant]}: {row.reason}"
    return ", ".join(sorted({op for row in results.values() for op in row.fallback_ops}))


def cpu_reference(value):
    """A chip tensor's CPU copy over a copy of its whole storage: same sizes, strides, offset."""
    if not isinstance(value, torch.Tensor) or value.device.type == "cpu":
        return value
    storage = value.untyped_storage()
    whole_storage = (value.storage_offset() == 0 and value.is_contiguous()
                     and value.numel() * value.element_size() == storage.nbytes())
    if value.layout != torch.strided or whole_storage:
        return value.detach().cpu()
    elements = storage.nbytes() // value.element_size()
    memory = torch.empty(0, dtype=value.dtype, device=value.device).set_(storage, 0, (elements,), (1,))
    return memory.cpu().as_strided(value.shape, value.stride(), value.storage_offset())


def cpu_reference_leaf(value):
    """For gradients: a CPU copy that requires grad where the chip tensor does."""
    copy = cpu_reference(value)
    if isinstance(value, torch.Tensor) and value.requires_grad:
        copy = copy.detach().requires_grad_()
    return copy


def _first_line(error: BaseException) -> str:
    """The error's first line; for a mismatch also ``assert_close``'s greatest absolute difference,
    which tells rounding from a wrong result."""
    lines = str(error).strip().splitlines()
    reason = f"{type(error).__name__}: {lines[0] if lines else ''}"
    difference = next((line for line in lines if line.startswith("Greatest absolute difference: ")), None)
    if difference:
        reason += f" ({difference[0].lower()}{difference[1:]})"
    return reason[:160]


def _same_metadata(got, expected) -> None:
    """For outputs the CPU itself does not repeat (random, uninitialised): shapes and dtypes."""
    got_leaves, expected_leaves = tree_flatten(got)[0], tree_flatten(expected)[0]
    assert len(got_leaves) == len(expected_leaves), "different number of outputs"
    for g, e in zip(got_leaves, expected_leaves):
        if isinstance(e, torch.Tensor):
            assert (g.shape, g.dtype) == (e.shape, e.dtype), f"{g.shape} {g.dtype} != {e.shape} {e.dtype}"


class CpuCannotRun(Exception):
    """The sample fails on the CPU too (a CUDA-only OpInfo, ...): not the chip's to pass."""


def _compare(chip_call: Callable[[], object], cpu_call: Callable[[], object]) -> Counter:
    """Run ``cpu_call`` twice (does the CPU repeat itself?), then ``chip_call``; compare.

    Raises on a chip error or a mismatch; returns the fallback counts of the chip call alone.
    """
    try:
        expected = [cpu_call(), cpu_call()]
    except Exception as error:  # noqa: BLE001
        raise CpuCannotRun(_first_line(error)) from error
    before = Counter(FALLBACK_COUNTS)
    got = chip_call()
    fell_back = Counter(FALLBACK_COUNTS) - before
    got = tree_map(cpu_reference, got)
    try:
        torch.testing.assert_close(expected[1], expected[0], equal_nan=True)
    except AssertionError:
        _same_metadata(got, expected[0])
    else:
        torch.testing.assert_close(got, expected[0], equal_nan=True, check_device=False)
    return fell_back


def _call(opinfo, sample_args, to_device=lambda value: value, **extra):
    args = tree_map(to_device, sample_args)
    return opinfo(args[0], *args[1], **args[2], **extra)


def _forward(opinfo, sample) -> Counter:
    args = (sample.input, sample.args, sample.kwargs)
    return _compare(lambda: _call(opinfo, args), lambda: _call(opinfo, args, cpu_reference))


def _noncontiguous(opinfo, sample) -> Counter:
    return _forward(opinfo, sample.noncontiguous())


def _out(opinfo, sample) -> Counter:
    """``op(..., out=buffers)`` must return the chip buffers themselves, filled as the CPU fills them."""
    args = (sample.input, sample.args, sample.kwargs)
    try:
        template = _call(opinfo, args, cpu_reference)
    except Exception as error:  # noqa: BLE001
        raise CpuCannotRun(_first_line(error)) from error

    def on_chip():
        out = tree_map(lambda t: torch.empty_like(t, device="toychip"), template)
        pointers = [t.data_ptr() for t in tree_flatten(out)[0]]
        result = _written(opinfo, args, lambda value: value, out)
        leaves = tree_flatten(result)[0]
        assert all(r is o for r, o in zip(leaves, tree_flatten(out)[0])), "out= did not return the out tensors"
        assert [t.data_ptr() for t in leaves] == pointers, "out= moved the out tensors to new memory"
        return result

    return _compare(on_chip, lambda: _written(opinfo, args, cpu_reference, tree_map(torch.empty_like, template)))


def _written(opinfo, args, to_device, out):
    """``op(..., out=out)``'s result; ``out`` itself for out= overloads that return nothing
    (``split_with_sizes_copy.out``)."""
    result = _call(opinfo, args, to_device, out=out)
    return out if result is None else result


def _output_gradient(t: torch.Tensor) -> torch.Tensor:
    """A fixed, non-uniform gradient (a wrong transpose shows; no RNG)."""
    return torch.linspace(-1, 1, t.numel(), dtype=t.dtype).reshape(t.shape)


def _gradients(opinfo, sample, to_device):
    args = tree_map(to_device, (sample.input, sample.args, sample.kwargs))
    inputs = [t for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    outputs = sample.output_process_fn_grad(opinfo(args[0], *args[1], **args[2]))
    outputs = [t for t in tree_flatten(outputs)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not inputs or not outputs:
        return ()
    grads = [_output_gradient(t).to(t.device) for t in outputs]
    return torch.autograd.grad(outputs, inputs, grads, allow_unused=True)


def _grad(opinfo, sample) -> Counter:
    return _compare(lambda: _gradients(opinfo, sample, lambda v: v), lambda: _gradients(opinfo, sample, cpu_reference_leaf))


_RUNNERS = {"forward": _forward, "noncontiguous": _noncontiguous, "out": _out, "grad": _grad}


def _applies(opinfo, variant: str, dtype: torch.dtype) -> bool:
    if variant == "out":
        return opinfo.supports_out
    if variant == "grad":
        return opinfo.supports_autograd and dtype in opinfo.supported_backward_dtypes("cpu")
    return True


def opinfo_name(opinfo) -> str:
    """``name`` or ``name.variant`` (``nn.functional.dropout``, ``as_strided.partial_views``)."""
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


def _samples(opinfo, dtype: torch.dtype, variant: str) -> Iterator:
    return iter(opinfo.sample_inputs("toychip", dtype, requires_grad=variant == "grad"))


def check_op(opinfo, dtype: torch.dtype = torch.float32, max_samples: int = 4,
             variant: str = "forward") -> OpResult | None:
    """Classify one OpInfo in one variant on up to ``max_samples`` samples; ``None`` if it does
    not apply (no ``out=``, no autograd) or no sample runs on the CPU."""
    if not _applies(opinfo, variant, dtype):
        return None
    name, run = opinfo_name(opinfo), _RUNNERS[variant]
    fell_back, samples = Counter(), 0
    try:
        for sample in _samples(opinfo, dtype, variant):
            if samples == max_samples:
                break
            try:
                fell_back += run(opinfo, sample)
            except CpuCannotRun:
                continue
            samples += 1
    except Exception as error:  # noqa: BLE001 -- any failure is a verdict, not a crash of the sweep
        return OpResult(name, "failing", samples + 1, reason=_first_line(error), variant=variant)
    if samples == 0:
        return None
    return OpResult(name, "fallback" if fell_back else "native", samples, tuple(sorted(fell_back)), variant=variant)


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


def sweep(ops=None, dtype: torch.dtype = torch.float32, max_samples: int = 4,
          variants=VARIANTS) -> SweepResult:
    """Sweep the OpInfos named in ``ops`` (``name`` or ``name.variant``; ``None``: all) for ``dtype``,
    in each of ``variants``.

    OpInfos whose CPU dtypes exclude ``dtype`` are left out, as device-generic tests leave them
    out; those PyTorch does not compare with the CPU either, or whose samples all fail on the
    CPU, are listed in ``skipped``.
    """
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise ValueError(f"unknown sweep variants {sorted(unknown)}; expected some of {VARIANTS}")
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
        rows = [row for variant in variants if (row := check_op(opinfo, dtype, max_samples, variant))]
        if rows:
            result.rows.extend(rows)
        else:
            result.skipped.append(name)
    return result
