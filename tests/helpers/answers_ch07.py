"""Chapter 07's catalogue: plausible wrong answers, each with the belief it embodies, and
correct answers written differently from the references.

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch._C import DispatchKey, DispatchKeySet
from torch.library import custom_op

import toychip

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
TANH_CUBIC = 0.044715


# --- 07.gelu_native ------------------------------------------------------------------

def _erf(a):
    return toychip.kernels.KERNELS["erf"].fn(a)


def _gelu_exact(a):
    return 0.5 * a * (1 + _erf(a / math.sqrt(2)))


def _gelu_tanh(a):
    return 0.5 * a * (1 + np.tanh(SQRT_2_OVER_PI * (a + TANH_CUBIC * a ** 3)))


def _slope_exact(a):
    return 0.5 * (1 + _erf(a / math.sqrt(2))) + a * np.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)


def _slope_tanh(a):
    t = np.tanh(SQRT_2_OVER_PI * (a + TANH_CUBIC * a ** 3))
    return 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * TANH_CUBIC * a * a)


def _register_gelu(forward=None, backward=None):
    if forward is not None:
        toychip.register_kernel("aten::gelu", forward)
    if backward is not None:
        toychip.register_kernel("aten::gelu_backward", backward)


def _gelu(a, approximate="none"):
    return _gelu_tanh(a) if approximate == "tanh" else _gelu_exact(a)


def _gelu_backward(grad, a, approximate="none"):
    return grad * (_slope_tanh(a) if approximate == "tanh" else _slope_exact(a))


def gelu_forward_only():
    _register_gelu(forward=_gelu)


def gelu_always_tanh():
    _register_gelu(lambda a, approximate="none": _gelu_tanh(a),
                   lambda grad, a, approximate="none": grad * _slope_tanh(a))


def gelu_backward_always_exact():
    _register_gelu(_gelu, lambda grad, a, approximate="none": grad * _slope_exact(a))


def gelu_backward_returns_slope():
    def gelu_backward(grad, a, approximate="none"):
        return _slope_tanh(a) if approximate == "tanh" else _slope_exact(a)
    _register_gelu(_gelu, gelu_backward)


def gelu_writes_into_input():
    def gelu(a, approximate="none"):
        half_cdf = 0.5 * (1 + (np.tanh(SQRT_2_OVER_PI * (a + TANH_CUBIC * a ** 3)) if approximate == "tanh"
                               else _erf(a / math.sqrt(2))))
        np.multiply(a, half_cdf, out=a)   # no new buffer: reuse the input's
        return a
    _register_gelu(gelu, _gelu_backward)


def gelu_approximate_always_passed():
    def gelu(a, *, approximate):
        return _gelu(a, approximate)

    def gelu_backward(grad, a, *, approximate):
        return _gelu_backward(grad, a, approximate)
    _register_gelu(gelu, gelu_backward)


def gelu_float64_from_math_erf():
    erf = np.vectorize(math.erf)   # float64 out, whatever goes in

    def gelu(a, approximate="none"):
        return _gelu_tanh(a) if approximate == "tanh" else 0.5 * a * (1 + erf(a / math.sqrt(2)))

    def gelu_backward(grad, a, approximate="none"):
        if approximate == "tanh":
            return grad * _slope_tanh(a)
        return grad * (0.5 * (1 + erf(a / math.sqrt(2))) + a * np.exp(-0.5 * a * a) / math.sqrt(2 * math.pi))
    _register_gelu(gelu, gelu_backward)


def gelu_via_sigmoid_and_vectorized_erf():
    """0.5 (1 + tanh z) = sigmoid(2z); math.erf element by element instead of the SDK's erf."""
    def erf(z):
        return np.vectorize(math.erf, otypes=[np.float64])(z).astype(z.dtype)

    def sigmoid(z):
        return 1 / (1 + np.exp(-z))

    def gelu(a, approximate="none"):
        if approximate == "tanh":
            return a * sigmoid(2 * SQRT_2_OVER_PI * (a + TANH_CUBIC * a ** 3))
        return a * (1 + erf(a / math.sqrt(2))) / 2

    def gelu_backward(grad_output, a, approximate="none"):
        if approximate == "tanh":
            s = sigmoid(2 * SQRT_2_OVER_PI * (a + TANH_CUBIC * a ** 3))
            return grad_output * (s + a * s * (1 - s) * 2 * SQRT_2_OVER_PI * (1 + 3 * TANH_CUBIC * a ** 2))
        cdf = (1 + erf(a / math.sqrt(2))) / 2
        return grad_output * (cdf + a * np.exp(-a ** 2 / 2) / math.sqrt(2 * math.pi))
    _register_gelu(gelu, gelu_backward)


def gelu_kernels_from_a_table():
    """One kernel per op, picking the formula from a dict keyed by approximate; sech² as 1/cosh²."""
    def sech_squared(z):
        return 1 / np.cosh(z) ** 2

    def tanh_slope(a):
        z = SQRT_2_OVER_PI * (a + TANH_CUBIC * a ** 3)
        return 0.5 * (1 + np.tanh(z)) + 0.5 * a * sech_squared(z) * SQRT_2_OVER_PI * (1 + 3 * TANH_CUBIC * a ** 2)
    forward = {"none": _gelu_exact, "tanh": _gelu_tanh}
    slope = {"none": _slope_exact, "tanh": tanh_slope}
    toychip.register_kernel("aten::gelu", lambda a, **kw: forward[kw.get("approximate", "none")](a))
    toychip.register_kernel("aten::gelu_backward", lambda g, a, **kw: g * slope[kw.get("approximate", "none")](a))


# --- 07.dispatch_keys (replaced later: its wrong answers stay) -------------------------

def keys_ignoring_thread_local_state(tensors):
    keys = torch._C._dispatch_keys(tensors[0])
    for t in tensors[1:]:
        keys = keys | torch._C._dispatch_keys(t)
    names = []
    while (key := keys.highestPriorityTypeId()) != DispatchKey.Undefined:
        names.append(key.name)
        keys = keys.remove(key)
    return names


def keys_in_printed_order(tensors):
    keys = torch._C._dispatch_tls_local_include_set()
    for t in tensors:
        keys = keys | torch._C._dispatch_keys(t)
    keys = keys - torch._C._dispatch_tls_local_exclude_set()
    text = str(keys)
    return [k.strip() for k in text[text.index("(") + 1:text.rindex(")")].split(",") if k.strip()]


# --- 07.probe_path ---------------------------------------------------------------------

BACKEND_KEYS = ("CPU", "PrivateUse1")


def _install_probe(lib, keys, log, make_kernel):
    """Define the probe and register ``make_kernel(probe, index, name)`` at each key."""
    lib.define("probe(Tensor x) -> Tensor")
    probe = getattr(torch.ops, lib.ns).probe.default
    for index, name in enumerate(keys):
        lib.impl("probe", make_kernel(probe, index, name), name, with_keyset=True)


def _below(keyset, name):
    return keyset & torch._C._dispatch_keyset_full_after(getattr(DispatchKey, name))


def probe_logs_after_redispatch(lib, keys, log):
    def make_kernel(probe, index, name):
        def kernel(keyset, x):
            result = x.clone() if name in BACKEND_KEYS else probe.redispatch(_below(keyset, name), x)
            log.append(name)
            return result
        return kernel
    _install_probe(lib, keys, log, make_kernel)


def probe_without_redispatch(lib, keys, log):
    def make_kernel(probe, index, name):
        def kernel(keyset, x):
            log.append(name)
            return x.clone()
        return kernel
    _install_probe(lib, keys, log, make_kernel)


def probe_follows_the_list(lib, keys, log):
    def make_kernel(probe, index, name):
        def kernel(keyset, x):
            log.append(name)
            if name in BACKEND_KEYS:
                return x.clone()
            return probe.redispatch(DispatchKeySet(getattr(DispatchKey, keys[index + 1])), x)
        return kernel
    _install_probe(lib, keys, log, make_kernel)


def probe_closure_in_a_loop(lib, keys, log):
    lib.define("probe(Tensor x) -> Tensor")
    probe = getattr(torch.ops, lib.ns).probe.default
    for name in keys:
        def kernel(keyset, x):
            log.append(name)
            if name in BACKEND_KEYS:
                return x.clone()
            return probe.redispatch(_below(keyset, name), x)
        lib.impl("probe", kernel, name, with_keyset=True)


def probe_returns_its_input(lib, keys, log):
    def make_kernel(probe, index, name):
        def kernel(keyset, x):
            log.append(name)
            return x if name in BACKEND_KEYS else probe.redispatch(_below(keyset, name), x)
        return kernel
    _install_probe(lib, keys, log, make_kernel)


def probe_logs_highest_key_and_removes_it(lib, keys, log):
    """The key comes from the keyset the dispatcher hands over; the kernel removes it to go on."""
    def make_kernel(probe, index, name):
        def kernel(keyset, x):
            here = keyset.highestPriorityTypeId()
            log.append(here.name)
            if here.name in BACKEND_KEYS:
                return torch.clone(x)
            return probe.redispatch(keyset.remove(here), x)
        return kernel
    _install_probe(lib, keys, log, make_kernel)


class _ProbeKernel:
    """A kernel object per key that re-enters the dispatcher with its own key excluded."""

    def __init__(self, probe, name, log):
        self.probe, self.name, self.log = probe, name, log

    def __call__(self, keyset, x):
        self.log.append(self.name)
        if self.name in BACKEND_KEYS:
            return x.detach().clone()
        with torch._C._ExcludeDispatchKeyGuard(DispatchKeySet(getattr(DispatchKey, self.name))):
            return self.probe(x)


def probe_reenters_with_key_excluded(lib, keys, log):
    _install_probe(lib, keys, log, lambda probe, index, name: _ProbeKernel(probe, name, log))


# --- 07.boxed_fallback -----------------------------------------------------------------

def _on_cpu(value):
    if isinstance(value, torch.Tensor) and value.device.type == "toychip":
        return value.cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    return value


def _on_chip(value):
    if isinstance(value, torch.Tensor):
        return value.to("toychip")
    if isinstance(value, (list, tuple)):
        return type(value)(_on_chip(v) for v in value)
    return value


def _run_on_cpu(op, args, kwargs):
    cpu_args, cpu_kwargs = [_on_cpu(a) for a in args], {k: _on_cpu(v) for k, v in kwargs.items()}
    return cpu_args, cpu_kwargs, op(*cpu_args, **cpu_kwargs)


def _written(op, args, kwargs, cpu_args, cpu_kwargs):
    """(alias set, chip argument, its CPU copy) for every argument the op writes."""
    for i, arg in enumerate(op._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        positional = not arg.kwarg_only and i < len(args)
        chip = args[i] if positional else kwargs.get(arg.name)
        if isinstance(chip, torch.Tensor):
            yield frozenset(arg.alias_info.before_set), chip, cpu_args[i] if positional else cpu_kwargs[arg.name]


def _write_into(chip, cpu):
    if chip.shape != cpu.shape:
        chip.resize_(cpu.shape)
    chip.copy_(cpu)


def _returns(op, result, written: dict, move=_on_chip):
    """The schema's returns: a written argument itself where they alias, else ``move(result)``."""
    returns = op._schema.returns
    if not returns:
        return None
    results = result if isinstance(result, tuple) else (result,)
    out = [written.get(frozenset(ret.alias_info.before_set)) if ret.alias_info is not None else None
           for ret in returns]
    out = [chip if chip is not None else move(value) for chip, value in zip(out, results)]
    return tuple(out) if isinstance(result, tuple) else out[0]


def fallback_results_only(op, *args, **kwargs):
    _, _, result = _run_on_cpu(op, args, kwargs)
    return _on_chip(result)


def fallback_positional_writes_only(op, *args, **kwargs):
    cpu_args, cpu_kwargs, result = _run_on_cpu(op, args, kwargs)
    for i, arg in enumerate(op._schema.arguments[:len(args)]):
        if arg.alias_info is not None and arg.alias_info.is_write and isinstance(args[i], torch.Tensor):
            _write_into(args[i], cpu_args[i])
            return args[i]
    return _on_chip(result)


def fallback_rebinds_data(op, *args, **kwargs):
    cpu_args, cpu_kwargs, result = _run_on_cpu(op, args, kwargs)
    written = {}
    for alias, chip, cpu in _written(op, args, kwargs, cpu_args, cpu_kwargs):
        chip.data = cpu.to("toychip")
        written[alias] = chip
    return _returns(op, result, written)


def fallback_returns_fresh_results(op, *args, **kwargs):
    cpu_args, cpu_kwargs, result = _run_on_cpu(op, args, kwargs)
    for _, chip, cpu in _written(op, args, kwargs, cpu_args, cpu_kwargs):
        _write_into(chip, cpu)
    return _on_chip(result)


def fallback_leaves_results_on_cpu(op, *args, **kwargs):
    cpu_args, cpu_kwargs, result = _run_on_cpu(op, args, kwargs)
    written = {}
    for alias, chip, cpu in _written(op, args, kwargs, cpu_args, cpu_kwargs):
        _write_into(chip, cpu)
        written[alias] = chip
    return _returns(op, result, written, move=lambda value: value)


def fallback_writes_first_argument_only(op, *args, **kwargs):
    cpu_args, cpu_kwargs, result = _run_on_cpu(op, args, kwargs)
    written = {}
    for alias, chip, cpu in _written(op, args, kwargs, cpu_args, cpu_kwargs):
        _write_into(chip, cpu)
        written[alias] = chip
        break
    return _returns(op, result, written)


def fallback_writes_by_op_name(op, *args, **kwargs):
    cpu_args, cpu_kwargs, result = _run_on_cpu(op, args, kwargs)
    if op._overloadpacket.__name__.endswith("_"):   # in place: self is written
        _write_into(args[0], cpu_args[0])
        return args[0]
    if "out" in kwargs:                              # out= variant: out is written
        _write_into(kwargs["out"], cpu_kwargs["out"])
        return kwargs["out"]
    return _on_chip(result)


def fallback_with_pytree_and_named_arguments(op, *args, **kwargs):
    """Arguments bound to their schema names; pytree moves nested tensors; every write resizes."""
    from torch.utils._pytree import tree_map_only

    cpu_args = tree_map_only(torch.Tensor, lambda t: t.cpu(), args)
    cpu_kwargs = tree_map_only(torch.Tensor, lambda t: t.cpu(), kwargs)
    result = op(*cpu_args, **cpu_kwargs)
    schema = op._schema
    names = [arg.name for arg in schema.arguments]
    chip_by_name = {**dict(zip(names, args)), **kwargs}
    cpu_by_name = {**dict(zip(names, cpu_args)), **cpu_kwargs}
    by_alias = {}
    for arg in schema.arguments:
        chip = chip_by_name.get(arg.name)
        if arg.alias_info is not None and arg.alias_info.is_write and isinstance(chip, torch.Tensor):
            chip.resize_(cpu_by_name[arg.name].shape).copy_(cpu_by_name[arg.name])
            by_alias[tuple(sorted(arg.alias_info.before_set))] = chip
    if len(schema.returns) == 0:
        return None
    results = result if len(schema.returns) > 1 else [result]
    final = []
    for ret, value in zip(schema.returns, results):
        alias = tuple(sorted(ret.alias_info.before_set)) if ret.alias_info is not None else None
        final.append(by_alias[alias] if alias in by_alias
                     else tree_map_only(torch.Tensor, lambda t: t.to("toychip"), value))
    return final if len(schema.returns) > 1 else final[0]


def fallback_matching_returns_by_identity(op, *args, **kwargs):
    """Writes back, then swaps every returned CPU tensor that *is* a written CPU argument for its chip tensor."""
    cpu_args, cpu_kwargs, result = _run_on_cpu(op, args, kwargs)
    chip_for = {}
    for _, chip, cpu in _written(op, args, kwargs, cpu_args, cpu_kwargs):
        _write_into(chip, cpu)
        chip_for[id(cpu)] = chip

    def back(value):
        if isinstance(value, torch.Tensor):
            return chip_for[id(value)] if id(value) in chip_for else value.to("toychip")
        return value
    if isinstance(result, tuple):
        return tuple(back(v) for v in result)
    return back(result)


# --- 07.bias_gelu ----------------------------------------------------------------------

def _tanh_slope_torch(a):
    t = torch.tanh(SQRT_2_OVER_PI * (a + TANH_CUBIC * a ** 3))
    return 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * TANH_CUBIC * a * a)


def _exact_slope_torch(a):
    return 0.5 * (1 + torch.erf(a / math.sqrt(2))) + a * torch.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)


def _define_bias_gelu(namespace, *, fake=lambda x, bias: torch.empty_like(x), chip=True,
                      slope=_tanh_slope_torch, point=lambda x, bias: x + bias,
                      reduce=lambda grad, bias: grad.sum_to_size(bias.shape)):
    """The reference's shape, with one part swapped for a learner's version."""
    @custom_op(f"{namespace}::bias_gelu", mutates_args=())
    def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.gelu(x + bias, approximate="tanh")

    if fake is not None:
        bias_gelu.register_fake(fake)
    if chip is True:
        bias_gelu.register_kernel("toychip")(
            toychip.chip_kernel(f"{namespace}::bias_gelu", lambda x, bias: _gelu_tanh(x + bias)))
    elif chip is not None:
        bias_gelu.register_kernel("toychip")(chip)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        grad_a = grad * slope(point(x, bias))
        return grad_a, reduce(grad_a, bias)

    bias_gelu.register_autograd(backward, setup_context=setup_context)
    return bias_gelu


def bias_gelu_without_fake(namespace):
    return _define_bias_gelu(namespace, fake=None)


def bias_gelu_exact_backward(namespace):
    return _define_bias_gelu(namespace, slope=_exact_slope_torch)


def bias_gelu_bias_grad_summed_over_first_dim(namespace):
    return _define_bias_gelu(namespace, reduce=lambda grad, bias: grad.sum(0))


def bias_gelu_bias_grad_summed_over_leading_dims(namespace):
    return _define_bias_gelu(namespace, reduce=lambda grad, bias: grad.sum(dim=tuple(range(grad.dim() - 1))))


def bias_gelu_backward_at_x(namespace):
    return _define_bias_gelu(namespace, point=lambda x, bias: x)


def bias_gelu_fake_from_shape(namespace):
    return _define_bias_gelu(namespace, fake=lambda x, bias: torch.empty(x.shape))


def bias_gelu_chip_kernel_in_torch(namespace):
    return _define_bias_gelu(namespace, chip=lambda x, bias: F.gelu(x + bias, approximate="tanh"))


def bias_gelu_returns_nothing(namespace):
    _define_bias_gelu(namespace)


def bias_gelu_with_library_functions(namespace):
    """torch.library.register_* by name, returns the torch.ops packet; backward through aten::gelu_backward."""
    name = f"{namespace}::bias_gelu"

    @custom_op(name, mutates_args=())
    def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.add(x, bias), approximate="tanh")

    torch.library.register_fake(name)(lambda x, bias: x.new_empty(x.shape))
    torch.library.register_kernel(name, "toychip")(
        toychip.chip_kernel(name, lambda x, bias: _gelu_tanh(np.add(x, bias))))

    def setup_context(ctx, inputs, output):
        x, bias = inputs
        ctx.save_for_backward(x + bias)
        ctx.bias_size = bias.shape[0]

    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        grad_a = torch.ops.aten.gelu_backward(grad, a, approximate="tanh")
        return grad_a, grad_a.reshape(-1, ctx.bias_size).sum(0)

    torch.library.register_autograd(name, backward, setup_context=setup_context)
    return getattr(torch.ops, namespace).bias_gelu


def bias_gelu_by_formula_and_sigmoid(namespace):
    """Formulas written out (tanh as a sigmoid on the chip), empty with explicit dtype and device."""
    k = SQRT_2_OVER_PI

    @custom_op(f"{namespace}::bias_gelu", mutates_args=())
    def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        a = x + bias
        return 0.5 * a * (1 + torch.tanh(k * (a + TANH_CUBIC * a.pow(3))))

    @bias_gelu.register_fake
    def _(x, bias):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    def fused(x, bias):
        a = x + bias
        return a / (1 + np.exp(-2 * k * (a + TANH_CUBIC * a ** 3)))

    bias_gelu.register_kernel("toychip")(toychip.chip_kernel(f"{namespace}::bias_gelu", fused))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], inputs[1])

    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        grad_x = grad * _tanh_slope_torch(x + bias)
        leading = grad_x.dim() - bias.dim()
        return grad_x, grad_x.sum(dim=list(range(leading))) if leading else grad_x

    bias_gelu.register_autograd(backward, setup_context=setup_context)
    return bias_gelu


WRONG_ANSWERS = [
    ("07.gelu_native", gelu_forward_only,
     "the backward comes for free: autograd differentiates the forward kernel, so only aten::gelu needs a kernel"),
    ("07.gelu_native", gelu_always_tanh,
     "GELU is the tanh formula (as in BERT); approximate can be ignored"),
    ("07.gelu_native", gelu_backward_always_exact,
     "approximate only changes the forward: the gradient of GELU is always Phi(a) + a*phi(a)"),
    ("07.gelu_native", gelu_backward_returns_slope,
     "the backward kernel returns gelu'(a); autograd multiplies by the incoming gradient itself"),
    ("07.gelu_native", gelu_writes_into_input,
     "the kernel's input array is a scratch copy, so writing the result into it saves a buffer"),
    ("07.gelu_native", gelu_float64_from_math_erf,
     "the kernel wrapper casts the result to the tensor's dtype, so returning float64 costs nothing"),
    ("07.gelu_native", gelu_approximate_always_passed,
     "the dispatcher always passes approximate, so the kernel needs no default for it"),
    ("07.dispatch_keys", keys_ignoring_thread_local_state,
     "a call's keys are the tensors' own keys: the thread-local include and exclude sets play no part"),
    ("07.dispatch_keys", keys_in_printed_order,
     "the printed key set lists the keys highest priority first"),
    ("07.probe_path", probe_logs_after_redispatch,
     "where the kernel logs does not matter: appending after the redispatch returns gives the same path"),
    ("07.probe_path", probe_without_redispatch,
     "every registered kernel runs anyway; a kernel only has to log and return a result"),
    ("07.probe_path", probe_follows_the_list,
     "the next key is the next one in the list of keys I registered, not the next one in this call's key set"),
    ("07.probe_path", probe_closure_in_a_loop,
     "a kernel defined in a for loop remembers the key name the loop had when it was defined"),
    ("07.probe_path", probe_returns_its_input,
     "a probe changes nothing, so the backend kernel may return x itself instead of a copy"),
    ("07.boxed_fallback", fallback_results_only,
     "a fallback only has to return the op's results; the arguments the op writes update themselves"),
    ("07.boxed_fallback", fallback_positional_writes_only,
     "the written arguments are among args (in-place self); the kwarg-only out= needs no write-back"),
    ("07.boxed_fallback", fallback_rebinds_data,
     "pointing a written argument at new chip data (chip.data = ...) is the same as writing into its memory"),
    ("07.boxed_fallback", fallback_returns_fresh_results,
     "once the written arguments are updated, what the fallback returns for them does not matter"),
    ("07.boxed_fallback", fallback_leaves_results_on_cpu,
     "the dispatcher moves a fallback's CPU results back to the chip by itself"),
    ("07.boxed_fallback", fallback_writes_first_argument_only,
     "an op writes at most one argument, so the first written argument is the only one to copy back"),
    ("07.boxed_fallback", fallback_writes_by_op_name,
     "an op's name says what it writes: a trailing underscore writes self, an out= variant writes out"),
    ("07.bias_gelu", bias_gelu_without_fake,
     "custom_op needs only the real implementation; compilers and opcheck can trace into it"),
    ("07.bias_gelu", bias_gelu_exact_backward,
     "the GELU derivative is Phi(a) + a*phi(a) whichever approximation the forward uses"),
    ("07.bias_gelu", bias_gelu_bias_grad_summed_over_first_dim,
     "bias's gradient is grad_x summed over the batch dimension (dim 0)"),
    ("07.bias_gelu", bias_gelu_bias_grad_summed_over_leading_dims,
     "summing over dim=() reduces nothing, so sum(dim=range(ndim-1)) is right for 1-D x too"),
    ("07.bias_gelu", bias_gelu_backward_at_x,
     "the derivative of bias_gelu with respect to x is gelu'(x): the bias does not enter it"),
    ("07.bias_gelu", bias_gelu_fake_from_shape,
     "a fake kernel only has to get the shape right (dtype and device follow by default)"),
    ("07.bias_gelu", bias_gelu_chip_kernel_in_torch,
     "the chip kernel can be the same torch code as the CPU implementation; it runs on chip tensors anyway"),
    ("07.bias_gelu", bias_gelu_returns_nothing,
     "@custom_op registers the op globally, so the function need not return it"),
]

RIGHT_ANSWERS = [
    ("07.gelu_native", gelu_via_sigmoid_and_vectorized_erf,
     "tanh form as a sigmoid, erf from math.erf element by element (cast back to the input's dtype)"),
    ("07.gelu_native", gelu_kernels_from_a_table,
     "formulas looked up in a dict by approximate, taken from **kwargs; sech² as 1/cosh²"),
    ("07.probe_path", probe_logs_highest_key_and_removes_it,
     "logs keyset.highestPriorityTypeId() and redispatches with keyset.remove(it)"),
    ("07.probe_path", probe_reenters_with_key_excluded,
     "callable kernel objects that call the op again under an ExcludeDispatchKeyGuard of their key"),
    ("07.boxed_fallback", fallback_with_pytree_and_named_arguments,
     "pytree.tree_map_only, arguments bound by schema name, resize_ on every write, a list for several returns"),
    ("07.boxed_fallback", fallback_matching_returns_by_identity,
     "matches returns to written arguments by the identity of the CPU tensors instead of alias sets"),
    ("07.bias_gelu", bias_gelu_with_library_functions,
     "torch.library.register_fake/kernel/autograd by name, new_empty fake, aten::gelu_backward, torch.ops packet"),
    ("07.bias_gelu", bias_gelu_by_formula_and_sigmoid,
     "formulas written out, sigmoid on the chip, empty with explicit dtype/device, sum over leading dims"),
]
