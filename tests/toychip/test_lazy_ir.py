"""Is the pending graph described as plain data, and is its hash structural and stable?"""
import subprocess
import sys

import torch

import toychip
from toychip import lazy_tensor
from toychip.lazy_ir import IRNode

PROGRAM = "torch.relu(x * 2.0 + y).sum(dim=0)"


def _hash_of(x, y, program=PROGRAM) -> str:
    with toychip.lazy():
        out = eval(program)
        digest = lazy_tensor.graph_hash([out])
        toychip.mark_step()
    return digest


def _chip(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype).to("toychip")


def test_hash_ignores_values_and_float_scalars():
    assert _hash_of(_chip(3, 4), _chip(3, 4)) == _hash_of(_chip(3, 4), _chip(3, 4))
    assert (_hash_of(_chip(3, 4), _chip(3, 4), "torch.relu(x * 2.0 + y)")
            == _hash_of(_chip(3, 4), _chip(3, 4), "torch.relu(x * 0.5 + y)"))


def test_hash_changes_with_shape_op_and_dtype():
    base = _hash_of(_chip(3, 4), _chip(3, 4))
    assert _hash_of(_chip(5, 4), _chip(5, 4)) != base
    assert _hash_of(_chip(3, 4), _chip(3, 4), "torch.sigmoid(x * 2.0 + y).sum(dim=0)") != base
    assert _hash_of(_chip(3, 4, dtype=torch.float64), _chip(3, 4, dtype=torch.float64)) != base


def test_hash_is_the_same_in_another_process():
    script = ("import torch, toychip\nfrom toychip import lazy_tensor\n"
              "x, y = torch.ones(3, 4).to('toychip'), torch.ones(3, 4).to('toychip')\n"
              f"with toychip.lazy():\n    print(lazy_tensor.graph_hash([{PROGRAM}]))\n")
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == _hash_of(_chip(3, 4), _chip(3, 4))


def test_pending_graph_is_plain_data(chip_pair):
    _, chip = chip_pair
    with toychip.lazy():
        out = torch.relu(chip * 2.0)
        nodes = lazy_tensor.pending_graph([out])
    assert nodes == [
        IRNode(0, "device_data", "input", (), (), (4, 5), "float32", (1,), False),
        IRNode(1, "aten.mul.Tensor", "pointwise", (0,), (2.0,), (4, 5), "float32", (2,), False),
        IRNode(2, "aten.relu.default", "pointwise", (1,), (), (4, 5), "float32", (), True),
    ]
    assert len({hash(n) for n in nodes}) == 3


def test_keyword_constants_and_views_are_described(chip_pair):
    _, chip = chip_pair
    with toychip.lazy():
        out = chip.sum(dim=1, keepdim=True).view(2, 2).add(1.0, alpha=3)
        nodes = lazy_tensor.pending_graph([out])
    assert [(n.op, n.kind, n.inputs, n.constants) for n in nodes[1:]] == [
        ("aten.sum.dim_IntList", "reduction", (0,), ((1,), True)),
        ("aten.as_strided.default", "view", (1,), ((2, 2), (2, 1), 0)),
        ("aten.add.Tensor", "pointwise", (2,), (1.0, ("alpha", 3))),
    ]
