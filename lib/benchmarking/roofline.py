"""The copy roofline: the fastest any kernel can read and write the same bytes.

A fused pointwise chain reads its input once and writes its output once, exactly what
``x.clone()`` does. Timing the clone in the same run as the candidates gives the limit of
*this* machine, measured rather than taken from a data sheet:

    from benchmarking.roofline import compare_with_copy
    result = compare_with_copy({"eager": f, "compiled": g}, x, device="cuda")
    print(result.table())            # medians, GB/s, and each as a fraction of the copy
    result.fraction("compiled")      # 1.0: as fast as a plain copy of the same bytes
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from .measure import Comparison, compare

COPY = "copy (clone)"


@dataclass
class CopyRoofline:
    """Candidates timed together with a copy of the input, and the bytes a fused kernel moves."""

    comparison: Comparison
    bytes_moved: int

    def __getitem__(self, name: str):
        return self.comparison[name]

    def fraction(self, name: str) -> float:
        """Copy time over ``name``'s time: the share of the copy's bandwidth ``name`` reaches."""
        return self.comparison[COPY].median / self.comparison[name].median

    def bandwidth_gbs(self, name: str) -> float:
        """Bytes a single fused pass moves, divided by ``name``'s median time."""
        return self.bytes_moved / self.comparison[name].median / 1e9

    def table(self) -> str:
        width = max(len(name) for name in self.comparison.measurements)
        rows = [f"{'':{width}}  median µs   GB/s (1 read + 1 write)   share of copy"]
        for name, m in self.comparison.measurements.items():
            rows.append(f"{name:{width}}  {m.median * 1e6:9.1f}   {self.bandwidth_gbs(name):10.0f}"
                        f"                {self.fraction(name):6.0%}")
        rows.append(f"({self.comparison.hardware})")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.table()


def compare_with_copy(candidates: Mapping[str, Callable], x: torch.Tensor, **protocol) -> CopyRoofline:
    """:func:`compare` the candidates on ``x`` and, in the same interleaved run, ``x.clone()``."""
    timed = {**candidates, COPY: torch.Tensor.clone}
    return CopyRoofline(compare(timed, x, **protocol), 2 * x.numel() * x.element_size())
