"""Does torch.compile(backend="toychip") partition, fuse and print readable code?"""
import torch
import torch.nn as nn

import toychip
from toychip import compiler


def _compile_and_run(model, x):
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="toychip")
    out = compiled(x)
    out.sum().backward()
    return out


def test_backend_is_registered():
    assert "toychip" in torch._dynamo.list_backends()


def test_forward_and_backward_graphs_are_compiled():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to("toychip")
    before = len(compiler.COMPILED)
    _compile_and_run(model, torch.randn(3, 4).to("toychip"))
    kinds = [c.kind for c in compiler.COMPILED[before:]]
    assert kinds == ["forward", "backward"]


def test_unsupported_ops_form_cpu_islands():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.AvgPool2d(2)).to("toychip")
    _compile_and_run(model, torch.randn(1, 1, 6, 6).to("toychip"))
    forward = [c for c in compiler.COMPILED if c.kind == "forward"][-1]
    on_chip = set().union(*forward.partitions)
    cpu_ops = [n.name for n in forward.graph.nodes
               if n.op == "call_function" and n.name not in on_chip]
    assert any("avg_pool2d" in name for name in cpu_ops)
    assert any("convolution" in name for name in on_chip)


def test_generated_code_is_readable_python_with_fused_kernels(capsys):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to("toychip")
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend="toychip")(torch.randn(3, 4).to("toychip"))
    code = toychip.get_generated_code()
    assert "def fused_" in code and "sdk.addmm(" in code and "out=" in code
    compile(code.replace("# =====", "#"), "<generated>", "exec")  # valid Python
    toychip.print_generated_code()
    assert "fused: addmm -> relu" in capsys.readouterr().out


def test_compiled_inference_launches_fewer_kernels_than_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU()).to("toychip")
    x = torch.randn(3, 4).to("toychip")
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="toychip")
    with torch.no_grad():
        compiled(x)
        with toychip.profile() as eager:
            model(x)
        with toychip.profile() as fused:
            compiled(x)
    assert fused.launches < eager.launches
    assert fused.time_us < eager.time_us


def test_compiled_optimizer_keeps_cpu_step_counters_off_the_chip():
    """Adam's step counters are CPU tensors (not capturable): ``step += 1`` and the bias
    corrections computed from them are host work, as in eager mode, not chip launches."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3).to("toychip")
    model(torch.randn(2, 4).to("toychip")).sum().backward()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    torch._dynamo.reset()
    before = len(compiler.COMPILED)
    torch.compile(opt.step, backend="toychip")()
    graph = compiler.COMPILED[before]
    on_chip = set().union(*graph.partitions)
    devices = {n.name: n.meta["val"].device.type for n in graph.graph.nodes
               if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)}
    host_ops = {name for name, device in devices.items() if device == "cpu"}
    assert host_ops and not host_ops & on_chip           # step += 1, bias corrections
    assert {devices[name] for name in on_chip if name in devices} == {"toychip"}
