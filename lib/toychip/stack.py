"""A compile stack assembled from pieces: chapter 08's capstone.

:mod:`toychip.compiler` is the course's backend, one pipeline with its choices built in.
A vendor's backend is the same pipeline made of replaceable pieces, each of which the
course has the learner write in some chapter. In the order a training step's data meets
them::

    piece           chapter   where it acts
    decompositions  06        AOTAutograd, while tracing: ops the chip lacks become ops it has
    partition       08        each ATen graph (forward, backward, optimiser step) -> chip islands
    fusion          04        inside an island: which ops share one kernel launch
    kernels         08        eager chip kernels for the ops left outside the islands
    fallback        07        every op outside the islands that has no chip kernel
    allocator       08        which cached block serves each chip allocation

The first, third and fifth are the :class:`Pieces` a backend is given; the chapter 08
pieces are the learner's own functions in the same notebook (``chip_islands``,
``port_model``, ``choose_block``). :func:`compile_island` turns one island into a
:class:`~toychip.compiler.ChipIsland` with a fusion policy of chapter 04's form. Grading
gives a backend :func:`course_pieces`; in self-study, ``grader.my_pieces()`` makes the
:class:`Pieces` of the learner's own earlier answers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch.fx as fx

from .codegen import generate
from .compiler import ChipIsland, chip_decompositions
from .fallback import cpu_fallback
from .fusion import FusionError, fixed_groups
from .lazy_ir import describe


@dataclass(frozen=True)
class Pieces:
    """The pieces of the stack that come from earlier chapters.

    ``fusion(nodes: list[IRNode]) -> list[list[int]]`` (chapter 04's ``fusion_policy``),
    or ``None`` for the scheduler's own rules (:mod:`toychip.fusion`); ``fallback(op, *args,
    **kwargs)`` (chapter 07's ``chip_fallback``); ``owners`` says who wrote each piece.
    """

    decompositions: dict
    fusion: Callable | None
    fallback: Callable
    owners: dict[str, str] = field(default_factory=dict)


COURSE = "课程的"


def course_pieces() -> Pieces:
    """The course's own pieces: :func:`toychip.compiler.chip_decompositions`, the
    scheduler's fusion rules, :func:`toychip.cpu_fallback`."""
    return Pieces(chip_decompositions(), None, cpu_fallback,
                  {"decompositions": COURSE, "fusion": COURSE, "fallback": COURSE})


class _GraphNode:
    """An FX node seen as :func:`toychip.lazy_ir.describe` reads a lazy node."""

    def __init__(self, node: fx.Node, known: dict):
        self.target = "data" if node.op == "placeholder" else node.target
        self.args = tuple(_as_known(a, known) for a in node.args)
        self.kwargs = {k: _as_known(v, known) for k, v in node.kwargs.items()}
        self.meta = node.meta.get("val")


def _as_known(value, known: dict):
    if isinstance(value, fx.Node):
        return known[value]
    if isinstance(value, (list, tuple)):
        return type(value)(_as_known(v, known) for v in value)
    return value


def island_ir(module: fx.GraphModule) -> tuple[list, list[fx.Node]]:
    """An island's graph as chapter 04's :class:`~toychip.lazy_ir.IRNode` records, and the
    FX node of each record (its inputs are ``device_data`` records)."""
    nodes = [n for n in module.graph.nodes if n.op in ("placeholder", "call_function")]
    known: dict = {}
    for node in nodes:
        known[node] = _GraphNode(node, known)
    outputs = [known[n] for n in module.graph.output_node().all_input_nodes if n in known]
    return describe([known[n] for n in nodes], outputs), nodes


def compile_island(module: fx.GraphModule, name: str, fusion: Callable | None = None) -> ChipIsland:
    """One chip island as a chip program: scheduled with ``fusion``'s groups (``None``: the
    scheduler's own rules), turned into code (:mod:`toychip.codegen`), ready to call."""
    if fusion is None:
        return ChipIsland(generate(module, name))
    records, nodes = island_ir(module)
    groups = fusion(records)
    for group in groups:
        inputs = [i for i in group if not (isinstance(i, int) and 0 <= i < len(records))
                  or records[i].kind == "input"]
        if inputs:
            raise FusionError(f"fusion policy put {inputs} in a group: not ops of this island")
    with fixed_groups([[nodes[i] for i in group] for group in groups]):
        return ChipIsland(generate(module, name))
