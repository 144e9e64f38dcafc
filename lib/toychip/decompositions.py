"""Decompositions for ops the chip has no kernel for, applied where a graph is built.

Eager mode meets ``aten.gelu`` at the dispatcher, when it is already the op to run:
without a chip kernel it can only fall back to the CPU (chapter 07 has the learner add
that kernel). A graph mode sees the op before anything runs and can do better: replace
it by its decomposition, ``gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2)))``, whose ops the
chip has and the scheduler fuses with the kernel around them (a matmul epilogue) --
Inductor keeps a decomposition table for the same reason.

:data:`GRAPH_DECOMPOSITIONS` holds the ops whose PyTorch decomposition runs entirely on
chip kernels (``tests/toychip/test_decompositions.py`` traces each one to check): the
compiler hands them to AOTAutograd (:func:`toychip.compiler.chip_decompositions`), lazy
mode runs them while recording (:class:`toychip.lazy_tensor.LazyMode`).
"""
from __future__ import annotations

import torch
from torch._decomp import get_decompositions

aten = torch.ops.aten

GRAPH_DECOMPOSITIONS: dict = get_decompositions([aten.gelu.default, aten.gelu_backward.default])
