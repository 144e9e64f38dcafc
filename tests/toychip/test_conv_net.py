"""Does a conv net with batch norm and max-pooling train on chip kernels only, in every mode?

Conv2d -> BatchNorm2d (training mode) -> ReLU -> MaxPool2d -> Linear, cross-entropy, SGD
with momentum: ``toychip.strict()`` makes any CPU fallback an error, and gradients,
updated weights, running statistics and an eval step must equal the CPU's.
"""
import contextlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import toychip

RTOL = 1e-5


def assert_close(got, want, what: str = "") -> None:
    """Equal within 1e-5 relative, elementwise or to the tensor's largest magnitude (float32
    sums in another order differ by a few ulps of the largest term, not of each element)."""
    atol = RTOL * want.abs().max().item() if want.is_floating_point() and want.numel() else 0.0
    torch.testing.assert_close(got, want, rtol=RTOL, atol=atol, msg=lambda m: f"{what}: {m}")


def make_conv_bn_net() -> nn.Module:
    # no conv bias: batch norm cancels it (its gradient is exactly zero, i.e. float32 noise)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


def train_and_eval(mode: str, steps: int = 2):
    """Seeded training steps then one eval step; returns every number worth comparing."""
    torch.manual_seed(0)
    model = make_conv_bn_net()
    x, y = torch.randn(6, 2, 8, 8), torch.randint(0, 3, (6,))
    if mode != "cpu":
        model, x, y = model.to("toychip"), x.to("toychip"), y.to("toychip")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def loss_step(inputs, targets):
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()
        return loss

    predict = model
    if mode == "compiled":
        torch._dynamo.reset()
        loss_step, predict = torch.compile(loss_step, backend="toychip"), torch.compile(model, backend="toychip")
    context = toychip.lazy if mode == "lazy" else contextlib.nullcontext
    checks = toychip.strict() if mode != "cpu" else contextlib.nullcontext()
    with checks:
        for _ in range(steps):
            with context():
                opt.zero_grad()
                loss = loss_step(x, y)
                grads = [p.grad.clone() for p in model.parameters()]
                opt.step()
                toychip.mark_step()
        model.eval()
        with context(), torch.no_grad():
            logits = predict(x)
        results = {"loss": loss.detach(), "grads": grads, "params": list(model.parameters()),
                   "buffers": list(model.buffers()), "eval_logits": logits}
        return {k: [t.detach().cpu() for t in v] if isinstance(v, list) else v.cpu() for k, v in results.items()}


@pytest.fixture(scope="module")
def cpu_reference():
    return train_and_eval("cpu")


@pytest.mark.parametrize("mode", ["eager", "lazy", "compiled"])
def test_conv_bn_pool_net_trains_natively_and_matches_cpu(cpu_reference, mode):
    toychip.reset_coverage()
    chip = train_and_eval(mode)
    assert toychip.coverage().fallback == {}
    for key, ref in cpu_reference.items():
        for i, (got, want) in enumerate(zip(chip[key], ref) if isinstance(ref, list) else [(chip[key], ref)]):
            assert_close(got, want, f"{key}[{i}]")


POOLS = {"2x2": dict(kernel_size=2), "3x3_stride2_pad1": dict(kernel_size=3, stride=2, padding=1),
         "ceil_mode": dict(kernel_size=3, stride=2, ceil_mode=True),
         "dilated": dict(kernel_size=2, stride=1, dilation=2), "overlapping": dict(kernel_size=3, stride=1)}


@pytest.mark.parametrize("options", POOLS.values(), ids=POOLS.keys())
def test_max_pool_forward_indices_and_backward_match_cpu(options):
    torch.manual_seed(1)
    cpu = torch.randn(2, 3, 7, 9).relu().requires_grad_()  # relu: ties in windows of zeros
    chip = cpu.detach().to("toychip").requires_grad_()
    with toychip.strict():
        out, indices = F.max_pool2d(chip, return_indices=True, **options)
        out.backward(torch.arange(out.numel(), dtype=torch.float32).reshape(out.shape).to("toychip"))
    ref, ref_indices = F.max_pool2d(cpu, return_indices=True, **options)
    ref.backward(torch.arange(ref.numel(), dtype=torch.float32).reshape(ref.shape))
    assert torch.equal(indices.cpu(), ref_indices)
    assert_close(out.cpu(), ref, "output")
    assert_close(chip.grad.cpu(), cpu.grad, "grad")


NORMS = {"affine_running": lambda: nn.BatchNorm2d(3), "no_affine": lambda: nn.BatchNorm2d(3, affine=False),
         "no_running_stats": lambda: nn.BatchNorm2d(3, track_running_stats=False),
         "batchnorm1d": lambda: nn.BatchNorm1d(3)}


@pytest.mark.parametrize("make", NORMS.values(), ids=NORMS.keys())
def test_batch_norm_variants_match_cpu_in_train_and_eval(make):
    torch.manual_seed(2)
    ref_norm = make()
    norm = make().to("toychip")
    norm.load_state_dict(ref_norm.state_dict())
    cpu = torch.randn((5, 3, 4, 4) if isinstance(ref_norm, nn.BatchNorm2d) else (5, 3)).requires_grad_()
    chip = cpu.detach().to("toychip").requires_grad_()
    with toychip.strict():
        (norm(chip) * chip).sum().backward()
        norm.eval()
        evaluated = norm(chip)
    (ref_norm(cpu) * cpu).sum().backward()
    ref_norm.eval()
    assert_close(evaluated.cpu(), ref_norm(cpu), "eval output")
    assert_close(chip.grad.cpu(), cpu.grad, "input grad")
    for got, want in zip(list(norm.parameters()) + list(norm.buffers()),
                         list(ref_norm.parameters()) + list(ref_norm.buffers())):
        assert_close(got.detach().cpu(), want.detach(), "parameter or buffer")
        if want.grad is not None:
            assert_close(got.grad.cpu(), want.grad, "parameter grad")


def test_lazy_batch_norm_running_stats_update_inside_the_graph():
    norm = nn.BatchNorm2d(3).to("toychip")
    x = torch.randn(4, 3, 2, 2, device="toychip")
    toychip.reset_lazy_metrics()
    with toychip.lazy():
        norm(x)
        assert hasattr(norm.running_mean.untyped_storage(), "_lazy")  # pending, not synced
    metrics = toychip.lazy_metrics()
    assert metrics.graphs_executed == 1 and not metrics.fallback_ops
    torch.testing.assert_close(norm.running_mean.cpu(), 0.1 * x.cpu().mean(dim=(0, 2, 3)))


def test_lazy_batch_norm_with_running_stats_in_part_of_a_buffer_runs_eagerly_and_matches_cpu():
    torch.manual_seed(4)
    ref, norm = nn.BatchNorm2d(3), nn.BatchNorm2d(3).to("toychip")
    norm.running_mean = torch.zeros(6, device="toychip")[:3]   # a view: the graph cannot rebind it
    x = torch.randn(4, 3, 2, 2)
    with toychip.lazy():
        out = norm(x.to("toychip"))
    assert_close(out.cpu(), ref(x), "output")
    assert_close(norm.running_mean.cpu(), ref.running_mean, "running mean")
