"""The checks behind the SDPA mirrors: OpenReg's test_ops.py and test_sdpa.py hold the same three
tests, so both mirror files (tests/toychip/openreg/) call these.

The chip's attention kernel serves ``aten::_scaled_dot_product_fused_attention_overrideable``
(the SDPA slot PyTorch leaves to PrivateUse1) and its backward; ``torch._fused_sdp_choice``
picks it. Values are compared with the CPU's ``scaled_dot_product_attention``.
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import toychip  # noqa: F401  (registers the chip)

SHAPE = (2, 3, 6, 4)  # batch, heads, sequence, head dim (upstream's are larger; the checks are the same)
overrideable = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
overrideable_backward = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward


def qkv(dtype=torch.float32):
    torch.manual_seed(0)
    return [torch.rand(SHAPE, dtype=dtype) for _ in range(3)]


def on_chip(tensors):
    return [t.to("toychip") for t in tensors]


def check_fused_sdp_choice():
    q, k, v = on_chip(qkv(torch.float16))
    assert torch._fused_sdp_choice(q, k, v) == SDPBackend.OVERRIDEABLE.value
    assert torch._fused_sdp_choice(q, k, v, dropout_p=0.5) == SDPBackend.MATH.value  # the kernel has no dropout
    with sdpa_kernel([SDPBackend.MATH]):
        assert torch._fused_sdp_choice(q, k, v) == SDPBackend.MATH.value


def check_fused_attention_forward():
    q, k, v = qkv()
    bias = torch.randn(1, SHAPE[1], SHAPE[2], SHAPE[2])
    for kwargs in ({}, {"is_causal": True, "scale": 0.3}):
        expected = F.scaled_dot_product_attention(q, k, v, **kwargs)
        out, logsumexp, *_, max_q, max_k, _, _, _ = overrideable(*on_chip((q, k, v)), **kwargs)
        assert out.device.type == "toychip" and (max_q, max_k) == (SHAPE[2], SHAPE[2])
        assert logsumexp.shape == SHAPE[:3]
        torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-5)
    out = overrideable(*on_chip((q, k, v, bias)))[0]
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
                               atol=1e-5, rtol=1e-5)
    halves = qkv(torch.float16)  # upstream's case: float16 through the function itself
    out = F.scaled_dot_product_attention(*on_chip(halves), attn_mask=None, dropout_p=0.0)
    assert out.dtype == torch.float16
    expected = F.scaled_dot_product_attention(*(t.float() for t in halves))
    torch.testing.assert_close(out.cpu().float(), expected, atol=2e-3, rtol=2e-3)


def check_fused_attention_backward():
    q, k, v = (t.requires_grad_() for t in qkv())
    bias = torch.randn(SHAPE[0], SHAPE[1], SHAPE[2], SHAPE[2], requires_grad=True)
    grad_out = torch.rand(SHAPE)
    F.scaled_dot_product_attention(q, k, v, attn_mask=bias).backward(grad_out)
    chip = on_chip((q.detach(), k.detach(), v.detach(), bias.detach()))
    out, logsumexp, cum_q, cum_k, max_q, max_k, seed, offset, _ = overrideable(*chip[:3], attn_bias=chip[3])
    grads = overrideable_backward(grad_out.to("toychip"), *chip, [True, True, True, True], out, logsumexp,
                                  cum_q, cum_k, max_q, max_k, dropout_p=0.0, is_causal=False,
                                  philox_seed=seed, philox_offset=offset)
    for got, expected in zip(grads, (q.grad, k.grad, v.grad, bias.grad)):
        assert got.device.type == "toychip"
        torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    chip_q = chip[0].requires_grad_()  # autograd reaches the same backward through the forward op
    overrideable(chip_q, *chip[1:3], attn_bias=chip[3])[0].backward(grad_out.to("toychip"))
    torch.testing.assert_close(chip_q.grad.cpu(), q.grad, atol=1e-5, rtol=1e-5)
