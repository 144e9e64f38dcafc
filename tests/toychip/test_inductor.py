"""torch.compile(fn) with the default backend (Inductor) on the chip gives the CPU's results.

Each function runs compiled on "toychip" and eagerly on the CPU. Shapes are tiny; every
lambda is its own code object, so Dynamo compiles each once without a reset.
"""
import inspect
import re
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounterWithBackend
from torch._inductor.utils import run_and_get_code
from torch.utils._pytree import tree_leaves

import toychip
from toychip import loops
from toychip.spec import ChipSpec, set_spec

CHIP = "toychip"


def to_chip(value, device=CHIP):
    return value.to(device) if isinstance(value, torch.Tensor) else value


def assert_matches(chip, cpu, rtol=1e-5, atol=1e-6):
    """Same structure, dtypes, shapes; floats close, everything else equal."""
    chip, cpu = tree_leaves(chip), tree_leaves(cpu)
    assert len(chip) == len(cpu)
    for i, (got, want) in enumerate(zip(chip, cpu)):
        got = got.cpu()
        assert (got.dtype, got.shape) == (want.dtype, want.shape), f"output {i}"
        if want.is_floating_point():
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=f"output {i}")
        else:
            assert torch.equal(got, want), f"output {i}: {got} != {want}"


def compiled_on_chip(fn, *args, dynamic=False):
    return torch.compile(fn, dynamic=dynamic)(*(to_chip(a) for a in args))


def kernel_sources(fn, *args):
    """The wrapper module Inductor generated for ``fn`` on the chip's copies of ``args``."""
    _, code = run_and_get_code(torch.compile(fn), *(to_chip(a) for a in args))
    return "\n".join(code)


# -- registration -----------------------------------------------------------------------
def test_import_toychip_does_not_import_inductor():
    code = "import sys, toychip; print('torch._inductor' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_default_compile_registers_the_chips_classes():
    from torch._inductor.codegen.common import (get_device_op_overrides, get_scheduling_for_device,
                                                get_wrapper_codegen_for_device)
    from toychip.inductor import ToychipDeviceOpOverrides, ToychipWrapperCodegen
    from toychip.inductor_codegen import NumpyScheduling

    compiled_on_chip(lambda x: x + 1, torch.ones(2))
    assert get_scheduling_for_device(CHIP) is NumpyScheduling
    assert get_wrapper_codegen_for_device(CHIP) is ToychipWrapperCodegen
    assert isinstance(get_device_op_overrides(CHIP), ToychipDeviceOpOverrides)


def test_the_device_module_answers_every_class_inductor_asks_it_for():
    from torch._inductor.codegen.common import init_backend_registration
    from torch.utils.backend_registration import _get_custom_mod_func

    asked = re.findall(r'_get_custom_mod_func\("(\w+)"\)', inspect.getsource(init_backend_registration))
    assert len(asked) == 4   # Inductor registers a PrivateUse1 device only if the module has all of them
    assert all(isinstance(_get_custom_mod_func(name), type) for name in asked)


@pytest.mark.parametrize("option", ["cpp_wrapper", "fx_wrapper"])
def test_a_wrapper_the_chip_cannot_be_refuses_clearly(option):
    with torch._inductor.config.patch({option: True}), pytest.raises(Exception, match=option):
        torch.compile(lambda x: x * 3)(torch.ones(2, device=CHIP))


# -- the op sweep -------------------------------------------------------------------------
torch.manual_seed(0)
X, Y = torch.randn(4, 6), torch.randn(4, 6)
POSITIVE = torch.rand(4, 6) + 0.1
A = torch.tensor([7, -7, 5, -5, 0, 9])
B = torch.tensor([2, 2, -3, -3, 4, -4])
INDEX = torch.tensor([[0, 2], [1, 5], [3, 0], [2, 4]])

SWEEP = {
    "unary": (lambda x, p: (x.abs(), x.exp(), torch.exp2(x), x.expm1(), p.log(), p.log1p(), p.log2(), p.sqrt(),
                            p.rsqrt(), x.tanh(), x.sin(), x.cos(), x.tan(), x.atan(), x.sinh(), torch.asinh(x),
                            torch.erf(x), x.sigmoid(), F.gelu(x), F.silu(x), x.floor(), x.ceil(), x.trunc(),
                            x.round(), x.sign(), torch.signbit(x), x.reciprocal(), F.softplus(x), x.frac()),
              (X, POSITIVE)),
    "binary": (lambda x, y: (x + y, x - y, x * y, x / y, x.pow(2), torch.pow(x.abs(), y), torch.maximum(x, y),
                             torch.minimum(x, y), torch.atan2(x, y), torch.fmod(x, y), torch.remainder(x, y),
                             torch.hypot(x, y), torch.copysign(x, y), x // y, torch.lerp(x, y, 0.3)), (X, Y)),
    "compare_where_clamp": (lambda x, y: (x < y, x <= y, x == y, x != y, x >= 0, torch.where(x > y, x, y),
                                          x.clamp(-0.5, 0.5), x.clamp(min=0), torch.isnan(x.log()),
                                          torch.isinf(x / 0), (x > 0) & (y > 0), (x > 0) ^ (y > 0), ~(x > 0)),
                            (X, Y)),
    "casts": (lambda x: (x.int(), x.long(), x.double(), (x * 10).to(torch.int32), x.bool(), (x > 0).float(),
                         (x * 100).to(torch.int8), (x * 100).to(torch.int16)), (X,)),
    "reductions": (lambda x: (x.sum(), x.sum(0), x.sum(1), x.mean(), x.mean(0), x.amax(0), x.amin(1), x.amax(),
                              x.argmax(), x.argmax(0), x.argmin(1), torch.var_mean(x), torch.var_mean(x, 0),
                              torch.var_mean(x, 1, correction=0), x.prod(0), x.prod(), (x > 0).any(),
                              (x > 0).all(0), (x > 0).any(1), x.logsumexp(1)), (X,)),
    "softmax_layer_norm": (lambda x: (x.softmax(0), x.softmax(1), x.log_softmax(1), F.layer_norm(x, (6,)),
                                      F.layer_norm(x, (6,), x[0], x[1]), F.layer_norm(x, (4, 6))), (X,)),
    "indexing": (lambda x, i, table: (torch.gather(x, 1, i), x[i[:, 0] - 4], x[:, i[0] - 6],
                                      F.embedding(i, table), x[-1], x[:, -2]), (X, INDEX, torch.randn(6, 3))),
    "shapes": (lambda x, y: (torch.cat([x, y]), torch.cat([x, y], 1), F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=3.0),
                             x[1:3, ::2] * 2, x.t() + 1, x.t().contiguous(), torch.stack([x, y]), x.flip(0),
                             x.unsqueeze(0).expand(3, 4, 6) + 0), (X, Y)),
    "int64_division": (lambda a, b: (a // b, a % b, torch.div(a, b, rounding_mode="trunc"), torch.fmod(a, b),
                                     torch.remainder(a, b), a / b, -a // 3, a % -3, a & b, a | b, ~a,
                                     a.sum(), a.prod(), a.max()), (A, B)),
    "int32_division": (lambda a, b: (a // b, a % b, torch.div(a, b, rounding_mode="trunc"), torch.fmod(a, b),
                                     a / b, a.sum(), a * 2), (A.int(), B.int())),
    "bool": (lambda m, n: (m & n, m | n, m ^ n, ~m, m.sum(), m.any(), m.all(), torch.where(m, 1, 2)), (A > 0, B > 0)),
    "float64": (lambda x, y: (x * y + 1, x.exp(), x.sum(0), x.softmax(1), torch.var_mean(x, 1), x.argmax(1)),
                (X.double(), Y.double())),
    "scalar_outputs": (lambda x: (x.sum() * 2, x.max(), (x.mean() + 1).exp(), x[0, 0] * 3), (X,)),
    "matmuls": (lambda x, y, w, b: ((x @ y.t()).relu(), F.linear(x, w, b).tanh(),
                                    torch.bmm(x.view(2, 2, 6), y.view(2, 6, 2)).softmax(-1)),
                (X, Y, torch.randn(3, 6), torch.randn(3))),
}


@pytest.mark.parametrize("name", SWEEP)
def test_op_sweep_matches_cpu_with_no_copies_or_fallbacks(name):
    fn, args = SWEEP[name]
    chip_args = [to_chip(a) for a in args]
    compiled = torch.compile(fn)
    compiled(*chip_args)
    toychip.reset_coverage()
    with toychip.profile() as p:
        result = compiled(*chip_args)
    assert_matches(result, fn(*args))
    assert p.copies == 0
    assert toychip.coverage().fallback == {}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_floats_compute_in_float32_and_round_once(dtype):
    """Widened loads, narrowed stores: the bits of the CPU computing in float32, then rounding."""
    def fn(a, b):
        return a * b + 1, (a.exp() * b).tanh(), a.sum(1), a.softmax(1), F.layer_norm(a, (6,)), a.amax(0)

    a, b = X.to(dtype), Y.to(dtype)
    got = tree_leaves(compiled_on_chip(fn, a, b))
    want = [t.to(dtype) for t in fn(a.float(), b.float())]
    assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))


def test_views_with_offsets_strides_and_expansion():
    base = torch.randn(40)
    assert_matches(compiled_on_chip(lambda b: (b[3:27].view(4, 6).exp(), b[5:].view(5, 7).t() * 2,
                                               b[1:8].expand(3, 7) + b[0], b[::3].sum(),
                                               b[2:26].view(4, 6).t().sum(1)), base),
                   (base[3:27].view(4, 6).exp(), base[5:].view(5, 7).t() * 2, base[1:8].expand(3, 7) + base[0],
                    base[::3].sum(), base[2:26].view(4, 6).t().sum(1)))


def test_in_place_mutation_of_inputs():
    def fn(a, b, i, v):
        a.add_(1)
        b.index_put_((i,), v, accumulate=True)  # repeated indices: an atomic_add store
        return a * 2

    args = [X.clone(), Y.clone(), torch.tensor([0, 2, 0, 3, 0]), torch.randn(5, 6)]
    chip_args = [to_chip(t) for t in args]
    result = torch.compile(fn)(*chip_args)
    assert_matches((result, chip_args[0], chip_args[1]), (fn(*args), args[0], args[1]))


def test_outputs_that_alias_inputs_share_storage():
    x = X.to(CHIP)
    outputs = torch.compile(lambda a: (a, a.view(6, 4), a[1], a.t()))(x)
    assert all(o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() for o in outputs)


def test_dynamic_shapes_compile_once_for_two_sizes():
    def fn(a):
        return (a.exp() * 2).sum(0), a.softmax(-1), a[1:] + 1

    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(fn, backend=counter, dynamic=True)
    for n in (3, 5):
        a = torch.randn(n, n + 1)
        assert_matches(compiled(a.to(CHIP)), fn(a))
    assert counter.frame_count == 1


def test_second_device_results_stay_on_it():
    x = X.to(f"{CHIP}:1")
    results = torch.compile(lambda a: ((a * 2).sum(1), a.exp(), a @ a.t()))(x)
    assert {r.device for r in results} == {x.device}
    assert_matches(results, ((X * 2).sum(1), X.exp(), X @ X.t()))


def test_dropout_masks_depend_on_the_seed_only():
    compiled = torch.compile(lambda a: F.dropout(a, 0.3, training=True))
    ones = torch.ones(100, 50, device=CHIP)
    torch.manual_seed(1)
    first = compiled(ones).cpu()
    torch.manual_seed(1)
    again, other = compiled(ones).cpu(), compiled(ones).cpu()
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert 0.27 < (first == 0).float().mean() < 0.33
    kept = first[first != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / 0.7))


def test_rand_is_uniform_in_unit_interval():
    values = torch.compile(lambda: torch.rand(4000, device=CHIP))().cpu()
    assert 0 <= values.min() and values.max() < 1 and abs(values.mean() - 0.5) < 0.02


def test_graph_break_runs_eager_chip_kernels_between_graphs():
    def fn(a):
        b = a.exp()
        torch._dynamo.graph_break()
        return (b * 2).sum()

    assert_matches(compiled_on_chip(fn, X), fn(X))


def test_op_without_numpy_source_names_itself():
    with pytest.raises(Exception, match="ops.lgamma, and the chip has no NumPy source"):
        compiled_on_chip(lambda a: torch.lgamma(a), X)


# -- charges ------------------------------------------------------------------------------
def test_each_kernel_call_is_one_launch_charged_as_its_decorator_states():
    fn = lambda a, b: (torch.relu(a * 2 + b).sum(1), (a - b).exp())  # noqa: E731
    source = kernel_sources(fn, X, Y)
    stated = {name: (int(nbytes), int(flops)) for nbytes, flops, name in
              re.findall(r"@loops\.kernel\(nbytes=(\d+), flops=(\d+), aten_ops=\d+\)\ndef (\w+)", source)}
    assert stated
    x, y = X.to(CHIP), Y.to(CHIP)
    with toychip.profile() as p:
        torch.compile(fn)(x, y)
    assert {name: (s.bytes, s.flops) for name, s in p.kernels.items()} == stated
    assert p.launches == len(stated) and all(s.calls == 1 for s in p.kernels.values())


def test_pointwise_chain_is_one_launch_of_its_operations():
    x = X.to(CHIP)
    compiled = torch.compile(lambda a: torch.relu(a * 2 + 1).exp())
    compiled(x)
    with toychip.profile() as p:
        compiled(x)
    (stat,) = p.kernels.values()
    assert p.launches == 1 and stat.flops == 4 * X.numel() and stat.bytes == 2 * X.numel() * 4
    assert loops.ATEN_OPS[next(iter(p.kernels))] == 4


def test_constants_are_written_where_they_are_used():
    source = kernel_sources(lambda a: torch.relu(a * 2), X)
    assert "tmp1 = tmp0 * np.float32(2.0)" in source and "tmp2 = np.maximum(tmp1, 0)" in source


# -- split reductions -----------------------------------------------------------------------
@pytest.fixture
def eight_compute_units():
    previous = set_spec(ChipSpec(compute_units=8))
    yield
    set_spec(previous)


def test_long_reduction_splits_in_two_launches(eight_compute_units):
    x = torch.randn(2, 65536)
    chip_x, compiled = x.to(CHIP), torch.compile(lambda a: a.sum(1))
    compiled(chip_x)
    with toychip.profile() as p:
        result = compiled(chip_x)
    assert_matches(result, x.sum(1), rtol=1e-4, atol=1e-4)
    assert p.launches == 2


def test_split_var_mean_without_a_welford_combine_says_so(eight_compute_units):
    with pytest.raises(NotImplementedError, match="welford_combine"):
        compiled_on_chip(lambda a: torch.var_mean(a, 1), torch.randn(2, 65536))


# -- training -----------------------------------------------------------------------------
class ConvBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                                  nn.Linear(3 * 6 * 6, 4))

    def forward(self, x):
        return self.body(x)


class EmbeddingLayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.norm, self.out = nn.Embedding(10, 8), nn.LayerNorm(8), nn.Linear(8, 4)

    def forward(self, ids):
        return self.out(F.gelu(self.norm(self.embed(ids)))).mean(1)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.out = nn.LSTM(5, 6, batch_first=True), nn.Linear(6, 4)

    def forward(self, x):
        return self.out(self.lstm(x)[0][:, -1])


def mlp_with_dropout():
    return nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.5), nn.Tanh(), nn.Linear(8, 4)).eval()


TRAINING = {
    "conv_batchnorm_sgd": (ConvBatchNorm, lambda: torch.randn(4, 1, 6, 6), torch.optim.SGD),
    "embedding_layernorm_adamw": (EmbeddingLayerNorm, lambda: torch.randint(0, 10, (4, 3)), torch.optim.AdamW),
    "lstm_sgd": (Recurrent, lambda: torch.randn(4, 3, 5), torch.optim.SGD),
    "dropout_eval_adamw": (mlp_with_dropout, lambda: torch.randn(4, 5), torch.optim.AdamW),
}


def train(make, inputs, targets, optimizer, device, compile_model, steps=2):
    torch.manual_seed(0)
    model = make().to(device)
    optim = optimizer(model.parameters(), lr=0.1)
    forward = torch.compile(model) if compile_model else model
    for _ in range(steps):
        optim.zero_grad()
        F.cross_entropy(forward(inputs.to(device)), targets.to(device)).backward()
        optim.step()
    return [p.grad.cpu() for p in model.parameters()], [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("name", TRAINING)
def test_training_steps_match_cpu(name):
    make, make_inputs, optimizer = TRAINING[name]
    torch.manual_seed(5)
    inputs, targets = make_inputs(), torch.randint(0, 4, (4,))
    chip = train(make, inputs, targets, optimizer, CHIP, compile_model=True)
    cpu = train(make, inputs, targets, optimizer, "cpu", compile_model=False)
    assert_matches(chip, cpu, rtol=1e-4, atol=1e-5)
