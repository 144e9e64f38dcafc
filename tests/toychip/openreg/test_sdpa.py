"""Mirrors OpenReg's tests/test_sdpa.py: scaled_dot_product_attention's PrivateUse1 backend.

The checks live in tests/helpers/openreg_sdpa.py (OpenReg's test_ops.py repeats these three
tests; test_ops.py here calls the same checks). Beyond upstream, which only runs the ops, they
compare every output and gradient with the CPU's scaled_dot_product_attention.

``torch._fused_sdp_choice`` answers OVERRIDEABLE on the chip, but ``F.scaled_dot_product_attention``
asks a C++ DispatchStub that only C++ can fill (``REGISTER_PRIVATEUSE1_DISPATCH``), so the
function itself still takes PyTorch's math path on the chip; the fused op is called directly.
"""
import openreg_sdpa

NOT_MIRRORED = {}


def test_fused_sdp_choice_privateuseone():
    openreg_sdpa.check_fused_sdp_choice()


def test_scaled_dot_product_fused_attention_overrideable():
    openreg_sdpa.check_fused_attention_forward()


def test_scaled_dot_product_fused_attention_overrideable_backward():
    openreg_sdpa.check_fused_attention_backward()
