"""The capstone's stack: assembled from the references, it trains the block as the course's backend does."""
import pytest
import torch

import toychip
from course_models import ch08_models as models
from solutions.ch08_porting import chip_backend
from toychip import stack


def relative_error(expected, got) -> float:
    return max(float((g - e).abs().max() / e.abs().max()) for e, g in zip(expected, got))


@pytest.mark.parametrize("activation", ["gelu", "leaky_relu"])
def test_reference_stack_trains_the_block_like_the_cpu(activation):
    with toychip.kernel_scope():
        chip = models.train_block(chip_backend(stack.course_pieces()), activation=activation)
    cpu = models.train_block(device="cpu", activation=activation)
    assert relative_error(cpu["grads"], chip["grads"]) <= 1e-5
    assert relative_error(cpu["losses"], chip["losses"]) <= 1e-5
    assert not {op for op in chip["fallbacks"] if op.split(".")[0] in ("gelu", "gelu_backward", "leaky_relu")}


def test_reference_stack_of_course_pieces_costs_what_the_course_backend_costs_but_reserves_less():
    """Same time, launches and tensor bytes; the course backend installs no allocator policy,
    the reference stack installs choose_block while its graphs run."""
    with toychip.kernel_scope():
        assembled = models.train_block(chip_backend(stack.course_pieces()))
    course = models.train_block("toychip")
    assert (assembled["time_us"], assembled["launches"], assembled["peak_bytes"]) == \
        (course["time_us"], course["launches"], course["peak_bytes"])
    assert assembled["peak_reserved"] < course["peak_reserved"]


def test_a_fusion_policy_of_chapter_04_form_groups_an_islands_ops():
    def pointwise_pairs(nodes):
        """Fuse each pointwise op with a pointwise producer only it uses."""
        return [[n.inputs[0], n.index] for n in nodes if n.kind == "pointwise" and n.inputs
                and nodes[n.inputs[0]].kind == "pointwise" and nodes[n.inputs[0]].users == (n.index,)
                and not nodes[n.inputs[0]].is_output]

    gm = torch.fx.symbolic_trace(lambda x: torch.ops.aten.relu.default(torch.ops.aten.mul.Tensor(x, x)))
    for node in gm.graph.nodes:
        node.meta["val"] = torch.empty(4, device="toychip")
    island = stack.compile_island(gm, "pairs", pointwise_pairs)
    x = torch.randn(4)
    with toychip.profile() as p:
        out = island(x.to("toychip"))
    assert p.launches == 1 and torch.equal(out.cpu(), torch.relu(x * x))


def test_a_fusion_policy_may_not_group_an_islands_inputs():
    gm = torch.fx.symbolic_trace(lambda x: torch.ops.aten.relu.default(x))
    for node in gm.graph.nodes:
        node.meta["val"] = torch.empty(4, device="toychip")
    with pytest.raises(toychip.FusionError):
        stack.compile_island(gm, "bad", lambda nodes: [[0, 1]])
