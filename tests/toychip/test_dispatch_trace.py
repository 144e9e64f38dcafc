"""Does trace_dispatch report the keys one call really visits, per device and mode?"""
import pytest
import torch

import toychip
from toychip import trace_dispatch

CPU_ADD = ["AutogradCPU", "CPU"]


@pytest.fixture
def cpu_and_chip():
    x = torch.randn(3, 3)
    return x, x.to("toychip")


def test_functional_op_skips_the_fallthrough_keys(cpu_and_chip):
    x, chip = cpu_and_chip
    assert trace_dispatch(torch.add, x, x).path() == CPU_ADD
    assert trace_dispatch(torch.add, chip, chip).path() == ["AutogradPrivateUse1", "PrivateUse1"]


def test_inplace_op_visits_ad_inplace_or_view(cpu_and_chip):
    x, _ = cpu_and_chip
    assert trace_dispatch(lambda t: t.add_(1), x.clone()).path() == ["AutogradCPU", "ADInplaceOrView", "CPU"]


def test_modes_change_the_path(cpu_and_chip):
    x, _ = cpu_and_chip
    with torch.no_grad():        # no_grad keeps the autograd key: its kernel just records nothing
        assert trace_dispatch(torch.add, x, x).path() == CPU_ADD
    with torch.inference_mode():  # inference mode excludes autograd altogether
        assert trace_dispatch(torch.add, x, x).path() == ["CPU"]
    with torch.autocast("cpu"):
        assert trace_dispatch(torch.mm, x, x).path() == ["AutocastCPU", "AutogradCPU", "CPU"]
        assert trace_dispatch(torch.add, x, x).path() == CPU_ADD


def test_native_and_fallback_kernels_are_named(cpu_and_chip):
    _, chip = cpu_and_chip
    relu = trace_dispatch(torch.relu, chip)
    assert relu.steps[-1].kernel == "toychip kernel"
    cumsum = trace_dispatch(torch.cumsum, chip, 0)
    assert cumsum.path("cumsum.out") == ["PrivateUse1", "CPU"]
    assert any(s.kernel.startswith("toychip fallback") for s in cumsum.steps)
    assert "aten.cumsum.out" in cumsum.ops()


def test_view_is_a_chain_with_chip_and_fallback_nodes(cpu_and_chip):
    _, chip = cpu_and_chip
    view = trace_dispatch(torch.cumsum, chip, 0).view(max_steps=6)
    kinds = [n.kind for n in view.nodes]
    assert kinds[0] == "dispatch_key" and "cpu" in kinds
    assert len(view.edges) == len(view.nodes) - 1
    assert view.edges[0].label == "redispatch"
    assert "toychip kernel" in str(trace_dispatch(torch.relu, chip))


def test_tracing_leaves_normal_dispatch_untouched(cpu_and_chip):
    x, _ = cpu_and_chip
    trace_dispatch(torch.add, x, x)
    assert not torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.PythonDispatcher)
    with pytest.raises(RuntimeError, match="nested"):
        trace_dispatch(lambda: trace_dispatch(torch.add, x, x))
    assert trace_dispatch(torch.add, x, x).path() == CPU_ADD


def test_graphviews_show_accepts_a_trace(cpu_and_chip):
    import graphviews
    view = graphviews.to_view(trace_dispatch(torch.relu, cpu_and_chip[1]))
    assert [n.kind for n in view.nodes] == ["dispatch_key", "chip"]


def test_view_can_keep_only_some_ops(cpu_and_chip):
    view = trace_dispatch(torch.cumsum, cpu_and_chip[1], 0).view(only=["cumsum", "cumsum.out"])
    assert [n.label for n in view.nodes] == ["AutogradPrivateUse1", "PrivateUse1", "PrivateUse1", "CPU"]
