"""Does torch.autocast("toychip") follow CUDA's lists: matmuls in 16 bits, float32 where 16 bits lose too much?"""
import pytest
import torch

from facts import backs
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


@backs("notebooks/07_dispatcher.ipynb", "芯片照抄 torch 2.13 里 CUDA 的名单（只少两个 cuDNN 专用的算子）")
def test_the_chip_registers_cuda_autocast_lists_except_cudnn_kernels():
    cuda = set(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCUDA"))
    chip = set(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastPrivateUse1"))
    assert chip == cuda - {"aten::cudnn_convolution", "aten::cudnn_convolution_transpose"}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fn", [torch.exp, torch.log1p, lambda t: torch.pow(t, 2), lambda t: torch.nn.functional.layer_norm(t, (6,)),
                                lambda t: torch.nn.functional.mse_loss(t, t.flip(0)), lambda t: torch.logsumexp(t, 1)])
@backs("notebooks/07_dispatcher.ipynb", "`exp`、`log`、各种损失等先转成 float32 再算")
def test_float32_ops_compute_16_bit_inputs_in_float32(fn, dtype):
    torch.manual_seed(2)
    x = torch.rand(4, 6).to(dtype)
    with torch.autocast("toychip", dtype=dtype):
        chip = fn(x.to("toychip"))
    assert chip.dtype == torch.float32
    torch.testing.assert_close(chip.cpu(), fn(x.float()))


@backs("notebooks/07_dispatcher.ipynb", "`softmax` 和求和一类算子在 float32 里累加")
def test_softmax_and_sums_accumulate_in_float32_unless_asked_otherwise():
    x = torch.randn(3, 5, device="toychip", dtype=torch.float16)
    with torch.autocast("toychip", dtype=torch.float16):
        assert x.softmax(1).dtype == x.sum().dtype == x.cumsum(0).dtype == torch.float32
        assert x.softmax(1, dtype=torch.float16).dtype == x.sum(dtype=torch.float16).dtype == torch.float16
        assert x.double().sum().dtype == torch.float64           # float64 is never cast
        torch.testing.assert_close(x.sum(1).cpu(), x.cpu().float().sum(1))


def test_norm_is_called_with_a_float32_dtype():
    x = torch.randn(3, 5, device="toychip", dtype=torch.bfloat16)
    with torch.autocast("toychip", dtype=torch.bfloat16):
        norm = torch.ops.aten.norm.Scalar(x)
    assert norm.dtype == torch.float32
    torch.testing.assert_close(norm.cpu(), x.cpu().float().norm())


@backs("notebooks/07_dispatcher.ipynb", "`addcmul` 等把浮点输入提升到其中最宽的类型")
def test_promote_ops_take_the_widest_floating_input():
    a, b = torch.randn(4, device="toychip"), torch.randn(4, device="toychip", dtype=torch.float16)
    with torch.autocast("toychip", dtype=torch.float16):
        assert torch.dot(a, b).dtype == torch.float32 and torch.dot(b, b).dtype == torch.float16
        assert torch.addcmul(b, a, b).dtype == torch.float32
        with pytest.raises(RuntimeError, match="toychip autocast: a torch.bfloat16 input inside autocast"):
            torch.dot(a.bfloat16(), b)


@backs("notebooks/07_dispatcher.ipynb", "`binary_cross_entropy` 也和 CUDA 一样直接报错")
def test_binary_cross_entropy_is_unsafe_and_its_logits_version_runs_in_float32():
    p, target = torch.rand(2, 3, device="toychip"), torch.rand(2, 3, device="toychip")
    with torch.autocast("toychip", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            torch.nn.functional.binary_cross_entropy(p, target)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(p.half(), target)
    assert loss.dtype == torch.float32


def test_cpu_tensors_and_float64_are_left_alone():
    cpu, wide = torch.randn(3, 3), torch.randn(3, 3, device="toychip", dtype=torch.float64)
    with torch.autocast("toychip", dtype=torch.float16):
        assert (cpu @ cpu).dtype == torch.float32 and (wide @ wide).dtype == torch.float64
        assert torch.exp(cpu.half()).dtype == torch.float16
