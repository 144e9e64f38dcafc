"""The chip's LSTM- and GRU-cell and attention kernels: charged to the simulated clock like every kernel,
and clear about what they do not support. (Values against the CPU: the GRU's here, the LSTM's and
attention's in tests/toychip/openreg/test_rnn.py and test_sdpa.py.)"""
import pytest
import torch
import torch.nn as nn
from torch.nn.attention import SDPBackend

import toychip

attention = torch.ops.aten._scaled_dot_product_fused_attention_overrideable


def qkv(heads=(2, 2, 2)):
    return [torch.rand(1, h, 4, 8, device="toychip") for h in heads]


def test_lstm_steps_are_charged_with_their_flops():
    lstm = nn.LSTM(4, 8).to("toychip")
    x = torch.randn(3, 2, 4, device="toychip")
    with toychip.profile() as p:
        lstm(x)
    step = p.kernels["_thnn_fused_lstm_cell.default"]
    assert step.calls == 3   # one fused cell per time step
    assert step.flops == 3 * (4 * 2 * 4 * 8 + 5 * 2 * 8) and step.bytes > 0


def test_attention_is_charged_with_its_two_products():
    q, k, v = qkv()
    with toychip.profile() as p:
        attention(q, k, v)
    stat = p.kernels["_scaled_dot_product_fused_attention_overrideable.default"]
    assert stat.flops == 2 * (2 * 2 * 4 * 4 * 8)   # q@k^T and p@v: 2*L*S*E each, per head


def test_attention_refuses_dropout_clearly():
    with pytest.raises(NotImplementedError, match="no dropout"):
        attention(*qkv(), dropout_p=0.1)


def test_sdp_choice_takes_math_where_the_kernel_cannot_run():
    q, k, v = qkv((4, 2, 2))   # grouped-query heads
    assert torch._fused_sdp_choice(q, k, v, enable_gqa=True) == SDPBackend.MATH.value
    assert torch._fused_sdp_choice(*qkv()) == SDPBackend.OVERRIDEABLE.value


def test_gru_steps_run_on_the_chip_forward_and_backward():
    gru = nn.GRU(4, 8).to("toychip")
    x = torch.randn(3, 2, 4, device="toychip", requires_grad=True)
    toychip.reset_coverage()
    with toychip.profile() as p:
        gru(x)[0].sum().backward()
    assert p.kernels["_thnn_fused_gru_cell.default"].calls == 3   # one fused cell per time step
    assert p.kernels["_thnn_fused_gru_cell_backward.default"].calls == 3
    assert not {op for op in toychip.coverage().fallback if "gru" in op}


@pytest.mark.parametrize("bias", [True, False])
def test_gru_outputs_and_gradients_match_the_cpu(bias):
    torch.manual_seed(0)
    gru = nn.GRU(4, 6, num_layers=2, bias=bias)
    chip_gru = nn.GRU(4, 6, num_layers=2, bias=bias).to("toychip")
    chip_gru.load_state_dict(gru.state_dict())
    x, h0 = torch.randn(5, 3, 4, requires_grad=True), torch.randn(2, 3, 6)
    chip_x = x.detach().to("toychip").requires_grad_()
    out, h = gru(x, h0)
    chip_out, chip_h = chip_gru(chip_x, h0.to("toychip"))
    (out.sum() + (h ** 2).sum()).backward()
    (chip_out.sum() + (chip_h ** 2).sum()).backward()
    torch.testing.assert_close(chip_out.cpu(), out)
    torch.testing.assert_close(chip_x.grad.cpu(), x.grad)
    for chip_p, p in zip(chip_gru.parameters(), gru.parameters()):
        torch.testing.assert_close(chip_p.grad.cpu(), p.grad)
