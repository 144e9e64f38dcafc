"""The chip's LSTM-cell and attention kernels: charged to the simulated clock like every kernel,
and clear about what they do not support. (Values against the CPU: tests/toychip/openreg/test_rnn.py
and test_sdpa.py.)"""
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
