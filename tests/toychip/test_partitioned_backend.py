"""make_backend(partition_fn=...): the toy chip's compile backend with another partitioner,
and the memory-versus-recompute trade-off measured in device memory."""
import torch
from functorch.compile import min_cut_rematerialization_partition

import toychip
from toychip import compiler


def _loss(x, w1, w2):
    h = x @ w1
    a = torch.exp(-h * h) * torch.tanh(h) + torch.sigmoid(h)
    return torch.tanh(a @ w2).mean()


def _inputs():
    torch.manual_seed(0)
    return [torch.randn(16, 32), torch.randn(32, 32) / 6, torch.randn(32, 8) / 6]


def _step(backend):
    torch._dynamo.reset()
    args = [t.to("toychip").requires_grad_() for t in _inputs()]
    compiled = torch.compile(_loss, backend=backend)
    with toychip.profile() as p:
        loss = compiled(*args)
        held = p.live_bytes
        loss.backward()
    return loss.detach().cpu(), [a.grad.cpu() for a in args], held, p


def test_the_default_backend_is_make_backend_with_the_default_partitioner():
    assert callable(compiler.backend) and callable(compiler.make_backend())
    assert "toychip" in torch._dynamo.list_backends()


def test_a_custom_partition_fn_is_called_with_keyword_arguments():
    seen = {}

    def spy(joint_module, joint_inputs, **kwargs):
        seen.update(kwargs)
        return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)

    _step(compiler.make_backend(partition_fn=spy))
    assert "num_fwd_outputs" in seen


def test_min_cut_holds_less_memory_with_the_same_gradients():
    cpu_args = [t.requires_grad_() for t in _inputs()]
    _loss(*cpu_args).backward()
    loss_d, grads_d, held_d, prof_d = _step("toychip")
    loss_m, grads_m, held_m, prof_m = _step(compiler.make_backend(min_cut_rematerialization_partition))
    for a, d, m in zip(cpu_args, grads_d, grads_m):
        assert torch.allclose(d, a.grad, atol=1e-5) and torch.allclose(m, a.grad, atol=1e-5)
    assert torch.allclose(loss_d, loss_m)
    assert held_m < held_d and prof_m.peak_bytes < prof_d.peak_bytes
    assert prof_d.live_bytes == prof_m.live_bytes  # after the step only the gradients are left
