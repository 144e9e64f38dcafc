"""Do plugged-in cache keys and fusion policies change hits, launches and nothing else?"""
import pytest
import torch

import toychip
from toychip import lazy_tensor
from toychip.fusion import FusionError


def structure_key(nodes):
    """Ops, wiring, shapes, dtypes and non-float constants: the built-in key's content."""
    return tuple((n.op, n.inputs, n.shape, n.dtype,
                  tuple("float" if isinstance(c, float) else c for c in n.constants)) for n in nodes)


def values_key(nodes):
    """Too fine: float constants (a learning rate) are part of the key."""
    return tuple((n.op, n.inputs, n.shape, n.constants) for n in nodes)


def ops_only_key(nodes):
    """Too coarse: no shapes, so a new batch size looks like the same graph."""
    return tuple(n.op for n in nodes)


def _sgd_steps(lrs, batches, cache_key=None):
    """One lazy SGD step per (lr, batch); returns (metrics, final weight on the CPU)."""
    torch.manual_seed(0)
    w = torch.randn(4, 3).to("toychip")
    lazy_tensor.clear_cache()
    toychip.reset_lazy_metrics()
    for lr, batch in zip(lrs, batches):
        x = torch.randn(batch, 4).to("toychip")
        with toychip.lazy(cache_key=cache_key):
            grad = x.t().mm(torch.tanh(x.mm(w))) * (1.0 / batch)
            w = w - lr * grad
            toychip.mark_step()
    return toychip.lazy_metrics(), w.cpu()


def _counts(metrics):
    return metrics.cache_misses, metrics.cache_hits, metrics.false_hits


@pytest.mark.parametrize("key, lr_sweep, batch_sweep", [
    (None, (1, 2, 0), (3, 0, 0)),
    (structure_key, (1, 2, 0), (3, 0, 0)),
    (values_key, (3, 0, 0), (3, 0, 0)),
    (ops_only_key, (1, 2, 0), (3, 0, 2)),
])
def test_cache_key_decides_hits_and_misses(key, lr_sweep, batch_sweep):
    assert _counts(_sgd_steps([0.1, 0.05, 0.01], [8, 8, 8], key)[0]) == lr_sweep
    assert _counts(_sgd_steps([0.1, 0.1, 0.1], [8, 16, 4], key)[0]) == batch_sweep


def test_a_false_hit_recompiles_instead_of_running_the_wrong_program():
    _, expected = _sgd_steps([0.1, 0.1, 0.1], [8, 16, 4])
    _, got = _sgd_steps([0.1, 0.1, 0.1], [8, 16, 4], ops_only_key)
    torch.testing.assert_close(got, expected)


def _chain(x, y):
    return torch.sigmoid(torch.relu(x * 2.0 + y) - 0.5) * y


def _run(policy, cpu_pair):
    x, y = (t.to("toychip") for t in cpu_pair)
    lazy_tensor.clear_cache()
    with toychip.profile() as p:
        with toychip.lazy(fusion=policy):
            out = _chain(x, y)
    return p, out.cpu()


def no_fusion(nodes):
    return []


def fuse_everything_pointwise(nodes):
    return [[n.index for n in nodes if n.kind == "pointwise"]]


@pytest.fixture
def cpu_pair():
    torch.manual_seed(1)
    return torch.randn(16, 8), torch.randn(16, 8)


def test_fusion_policy_sets_launches_and_keeps_results(cpu_pair):
    expected = _chain(*cpu_pair)
    unfused, out_unfused = _run(no_fusion, cpu_pair)
    fused, out_fused = _run(fuse_everything_pointwise, cpu_pair)
    default, _ = _run(None, cpu_pair)
    assert unfused.launches == 6
    assert fused.launches == default.launches == 1
    assert fused.time_us < unfused.time_us
    torch.testing.assert_close(out_unfused, expected)
    torch.testing.assert_close(out_fused, expected)


def test_policy_receives_the_pending_graph(cpu_pair):
    seen = []
    _run(lambda nodes: seen.append(nodes) or [], cpu_pair)
    assert [n.op.split(".")[1] for n in seen[0] if n.kind != "input"] == [
        "mul", "add", "relu", "sub", "sigmoid", "mul"]


def _indices(nodes, kind):
    return [n.index for n in nodes if n.kind == kind]


@pytest.mark.parametrize("policy, message", [
    (lambda nodes: [_indices(nodes, "pointwise")[:2], _indices(nodes, "pointwise")[1:3]], "already belong"),
    (lambda nodes: [_indices(nodes, "input")[:1] + _indices(nodes, "pointwise")[:1]], "input node"),
    (lambda nodes: [[99]], "index 99"),
])
def test_malformed_policies_are_refused(cpu_pair, policy, message):
    with pytest.raises(FusionError, match=message):
        _run(policy, cpu_pair)


def test_a_group_whose_inner_value_is_used_outside_is_refused():
    x = torch.randn(4, 4).to("toychip")
    with pytest.raises(FusionError, match="outside the group"):
        with toychip.lazy(fusion=lambda nodes: [_indices(nodes, "pointwise")[:2]]):
            a = x * 2.0
            b = torch.relu(a)
            (a + b).cpu()


def test_matmul_and_reduction_rules():
    x, w = torch.randn(4, 4).to("toychip"), torch.randn(4, 4).to("toychip")
    with pytest.raises(FusionError, match="only pointwise"):
        with toychip.lazy(fusion=lambda nodes: [_indices(nodes, "reduction") + _indices(nodes, "pointwise")]):
            torch.relu(x.sum(dim=0)).cpu()
    with toychip.profile() as p:
        with toychip.lazy(fusion=lambda nodes: [_indices(nodes, "matmul") + _indices(nodes, "pointwise")]):
            out = torch.relu(x.mm(w))
    assert p.launches == 1
    torch.testing.assert_close(out.cpu(), torch.relu(x.cpu().mm(w.cpu())))
