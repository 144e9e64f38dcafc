"""Mirrors OpenReg's test_autocast.py: torch.autocast("toychip") -- dtypes, its lists, nesting, switches.

mm stands for the lower-precision list, asin for the float32 list, add for the ops autocast
passes through, binary_cross_entropy for the banned ones (``toychip/autocast.py`` has the lists).
"""
import pytest
import torch

DEVICE = "toychip"


@pytest.fixture
def operands():
    """A float32 (2, 3) and (3, 3) pair on the chip: shapes mm accepts."""
    torch.manual_seed(0)
    return torch.randn(2, 3, device=DEVICE), torch.randn(3, 3, device=DEVICE)


@pytest.fixture(autouse=True)
def default_autocast_dtype():
    """test_autocast_set_dtype changes the chip's autocast dtype; every test starts from float16."""
    yield
    torch.set_autocast_dtype(DEVICE, torch.float16)


def test_autocast_with_unsupported_type():
    message = ("In toychip autocast, but the target dtype is not supported. Disabling autocast.\n"
               "toychip Autocast only supports dtypes of torch.float16, torch.bfloat16 currently.")
    with pytest.warns(UserWarning, match=message):
        with torch.autocast(DEVICE, dtype=torch.float32):
            pass


def test_autocast_operator_not_supported():
    prediction, target = torch.rand(2, 3, device=DEVICE), torch.rand(2, 3, device=DEVICE)
    torch.nn.functional.binary_cross_entropy(prediction, target)          # fine outside autocast
    with torch.autocast(DEVICE, dtype=torch.float16):
        with pytest.raises(RuntimeError, match="torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss "
                                               "are unsafe to autocast."):
            torch.nn.functional.binary_cross_entropy(prediction, target)


def test_autocast_low_precision(operands):
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.mm(*operands).dtype == torch.float16


def test_autocast_fp32():
    angles = torch.rand(4, device=DEVICE, dtype=torch.float16)
    with torch.autocast(DEVICE):
        result = torch.asin(angles)
    assert result.dtype == torch.float32
    torch.testing.assert_close(result.cpu(), torch.asin(angles.cpu().float()))


def test_autocast_default_dtype():
    assert torch.get_autocast_dtype(DEVICE) == torch.float16


def test_autocast_set_dtype():
    for dtype in (torch.bfloat16, torch.float16):
        torch.set_autocast_dtype(DEVICE, dtype)
        assert torch.get_autocast_dtype(DEVICE) == dtype


def test_autocast_bfloat16(operands):
    x, y = operands
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        result = torch.mm(x, y)
    assert result.dtype == torch.bfloat16
    torch.testing.assert_close(result.cpu(), x.cpu().bfloat16() @ y.cpu().bfloat16())


def test_autocast_low_precision_bfloat16(operands):
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        assert (operands[0] @ operands[1]).dtype == torch.bfloat16


def test_autocast_fp32_with_bfloat16():
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        assert torch.asin(torch.rand(4, device=DEVICE, dtype=torch.bfloat16)).dtype == torch.float32


def test_autocast_nested_context(operands):
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.mm(*operands).dtype == torch.float16
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            assert torch.mm(*operands).dtype == torch.bfloat16
        assert torch.mm(*operands).dtype == torch.float16        # the outer dtype is back
    assert torch.mm(*operands).dtype == torch.float32


def test_autocast_fallthrough_operation(operands):
    x, _ = operands
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.add(x, x).dtype == torch.float32
        assert torch.add(x.half(), x.half()).dtype == torch.float16


def test_autocast_with_requires_grad(operands):
    x, y = (t.requires_grad_() for t in operands)
    with torch.autocast(DEVICE, dtype=torch.float16):
        result = torch.mm(x, y)
    assert result.dtype == torch.float16 and result.requires_grad
    result.sum().backward()
    # the casts are recorded too: each leaf gets a float32 gradient of its own shape
    assert x.grad.dtype == y.grad.dtype == torch.float32
    assert x.grad.shape == x.shape and y.grad.shape == y.shape


def test_autocast_mixed_input_dtypes(operands):
    x, y = operands
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.mm(x, y.half()).dtype == torch.float16


def test_autocast_already_target_dtype(operands):
    x, y = (t.half() for t in operands)
    with torch.autocast(DEVICE, dtype=torch.float16):
        result = torch.mm(x, y)
    assert result.dtype == torch.float16
    assert torch.equal(result.cpu(), torch.mm(x, y).cpu())        # no cast: the same computation


def test_autocast_combination_operations(operands):
    x, y = operands
    with torch.autocast(DEVICE, dtype=torch.float16):
        product = torch.mm(x, y)
        angles = torch.asin(torch.rand(2, device=DEVICE))
        chained = torch.mm(product, y)
    assert (product.dtype, angles.dtype, chained.dtype) == (torch.float16, torch.float32, torch.float16)


def test_autocast_disable(operands):
    with torch.autocast(DEVICE, dtype=torch.float16, enabled=False):
        assert torch.mm(*operands).dtype == torch.float32


def test_autocast_cache_enabled(operands):
    with torch.autocast(DEVICE, dtype=torch.float16, cache_enabled=True):
        assert torch.is_autocast_cache_enabled()
        first, second = torch.mm(*operands), torch.mm(*operands)
    assert first.dtype == second.dtype == torch.float16
    assert torch.equal(first.cpu(), second.cpu())


def test_autocast_fp32_operation_with_float16_input():
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.asin(torch.rand(3, device=DEVICE, dtype=torch.float16)).dtype == torch.float32


def test_autocast_fp32_operation_with_float32_input():
    with torch.autocast(DEVICE, dtype=torch.float16):
        assert torch.asin(torch.rand(3, device=DEVICE)).dtype == torch.float32
