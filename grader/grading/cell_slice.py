"""Which of a submission's cells the sandbox runs: the ones its graded functions need.

A chapter notebook is mostly demonstrations (benchmarks, compiles, plots): running them
for grading costs up to a minute and decides nothing. The trusted side reads the cells as
text (it never runs them) and keeps every cell that defines a graded function, then,
transitively, every cell that defines or assigns into a name a kept cell uses. A cell it
cannot read (a syntax error, a star import) is kept. The slice over-approximates: a name
used anywhere in a kept cell pulls in every cell that binds it. What it cannot see (state
changed by a call, names made by ``exec``) is caught by the harness, which grades again
with every cell when the sliced run reports a missing name.
"""
from __future__ import annotations

import ast
import symtable
from dataclasses import dataclass

from IPython.core.inputtransformer2 import TransformerManager


@dataclass(frozen=True)
class CellNames:
    """What one cell binds and what it reads, as far as its text tells."""

    binds: frozenset[str]
    reads: frozenset[str]
    opaque: bool = False     # could not be analysed: always run it


def _table_names(table: symtable.SymbolTable, binds: set[str], reads: set[str]) -> None:
    module_level = table.get_type() == "module"
    for symbol in table.get_symbols():
        name = symbol.get_name()
        if module_level:
            if symbol.is_assigned() or symbol.is_imported():
                binds.add(name)
            if symbol.is_referenced():
                reads.add(name)
        elif symbol.is_global():
            (binds if symbol.is_assigned() else reads).add(name)
    for child in table.get_children():
        _table_names(child, binds, reads)


def _mutated_roots(tree: ast.AST) -> set[str]:
    """``torch._dynamo.config.x = 1`` and ``table[k] = v`` change the object their root names."""
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            while isinstance(node, (ast.Attribute, ast.Subscript)):
                node = node.value
            if isinstance(node, ast.Name):
                roots.add(node.id)
    return roots


def cell_names(source: str) -> CellNames:
    """The names a cell binds (or mutates) and reads; IPython magics are read as Python."""
    try:
        python = TransformerManager().transform_cell(source)
        tree = ast.parse(python)
        table = symtable.symtable(python, "<cell>", "exec")
    except (SyntaxError, ValueError):
        return CellNames(frozenset(), frozenset(), opaque=True)
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)):
        return CellNames(frozenset(), frozenset(), opaque=True)
    binds, reads = set(), set()
    _table_names(table, binds, reads)
    return CellNames(frozenset(binds | _mutated_roots(tree)), frozenset(reads))


def needed_cells(cells: list[tuple[int, str]], functions: set[str]) -> list[tuple[int, str]]:
    """The cells (in notebook order) that define ``functions``, and what those need."""
    names = {index: cell_names(source) for index, source in cells}
    kept = {index for index, found in names.items() if found.opaque or found.binds & functions}
    pending = list(kept)
    while pending:
        wanted = names[pending.pop()].reads
        for index, found in names.items():
            if index not in kept and found.binds & wanted:
                kept.add(index)
                pending.append(index)
    return [(index, source) for index, source in cells if index in kept]


def statically_bound(cells: list[tuple[int, str]]) -> set[str]:
    """Every name some cell binds, as far as the text tells."""
    return {name for _, source in cells for name in cell_names(source).binds}
