"""Does torch.autocast("toychip") run the matmul family in 16 bits, like CPU autocast does?"""
import pytest
import torch

from toychip import trace_dispatch


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matmul_runs_in_the_autocast_dtype_and_matches_cpu(dtype):
    torch.manual_seed(0)
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    with torch.autocast("toychip", dtype=dtype):
        chip = a.to("toychip") @ b.to("toychip")
        added = a.to("toychip") + 1
    with torch.autocast("cpu", dtype=dtype):
        cpu = a @ b
    assert chip.dtype == dtype and added.dtype == torch.float32   # add is not on autocast's list
    torch.testing.assert_close(chip.cpu(), cpu, atol=1e-2, rtol=1e-2)


def test_autocast_key_is_visited_only_for_listed_ops():
    x = torch.randn(3, 3).to("toychip")
    with torch.autocast("toychip", dtype=torch.bfloat16):
        assert trace_dispatch(torch.mm, x, x).path("mm") == ["AutocastPrivateUse1", "AutogradPrivateUse1", "PrivateUse1"]
        assert trace_dispatch(torch.add, x, x).path() == ["AutogradPrivateUse1", "PrivateUse1"]
    assert trace_dispatch(torch.mm, x, x).path() == ["AutogradPrivateUse1", "PrivateUse1"]


def test_linear_trains_under_autocast():
    torch.manual_seed(1)
    layer = torch.nn.Linear(4, 2).to("toychip")
    with torch.autocast("toychip", dtype=torch.float16):
        out = layer(torch.randn(5, 4).to("toychip"))
    assert out.dtype == torch.float16
    out.float().sum().backward()
    assert layer.weight.grad.dtype == torch.float32
