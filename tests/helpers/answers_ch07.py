"""Chapter 07's catalogue: plausible wrong answers, each with the belief it embodies, and
correct answers written differently from the references.

Tests paste this module into notebooks graded in the sandbox, where the solutions are
hidden; a wrong answer that is a reference with one mistake is a :mod:`mutants` mutant.
"""
import functools
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch._C import DispatchKey, DispatchKeySet
from torch.library import custom_op

import toychip
from mutants import mutant
from solutions.ch07_dispatcher import dispatch_chain

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


def gelu_numpy_float64_constants():
    """The formulas with constants computed by NumPy: np.sqrt returns a float64 scalar."""
    k, root2, root2pi = np.sqrt(2 / np.pi), np.sqrt(2.0), np.sqrt(2 * np.pi)

    def slope(a, approximate):
        if approximate == "tanh":
            t = np.tanh(k * (a + TANH_CUBIC * a ** 3))
            return 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * TANH_CUBIC * a * a)
        return 0.5 * (1 + _erf(a / root2)) + a * np.exp(-0.5 * a * a) / root2pi

    def gelu(a, approximate="none"):
        if approximate == "tanh":
            return 0.5 * a * (1 + np.tanh(k * (a + TANH_CUBIC * a ** 3)))
        return 0.5 * a * (1 + _erf(a / root2))
    _register_gelu(gelu, lambda grad, a, approximate="none": grad * slope(a, approximate))


def gelu_in_float64_cast_back():
    """Computes in float64 and casts the result back to the input's dtype."""
    def gelu(a, approximate="none"):
        return _gelu(a.astype(np.float64), approximate).astype(a.dtype)

    def gelu_backward(grad, a, approximate="none"):
        return _gelu_backward(grad.astype(np.float64), a.astype(np.float64), approximate).astype(a.dtype)
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


# --- 07.mini_dispatcher -----------------------------------------------------------------

chain_ignoring_exclude = mutant(
    dispatch_chain, "chain_ignoring_exclude", ("\n    keys = keys - exclude", ""))

chain_ignoring_include = mutant(
    dispatch_chain, "chain_ignoring_include", ("keys = include\n", "keys = DispatchKeySet(DispatchKey.Undefined)\n"))

chain_exclude_before_include = mutant(
    dispatch_chain, "chain_exclude_before_include",
    ("keys = include\n", "keys = DispatchKeySet(DispatchKey.Undefined)\n"),
    ("keys = keys - exclude", "keys = (keys - exclude) | include"))

chain_fallthrough_runs = mutant(
    dispatch_chain, "chain_fallthrough_runs", ('if kind != "fallthrough":\n            chain.append', 'if key.name in table:\n            chain.append'))


def _effective(tensor_keys, include, exclude):
    keys = include
    for tensor_key_set in tensor_keys:
        keys = keys | tensor_key_set
    return keys - exclude


def chain_redispatch_from_tensor_keys(table, tensor_keys, include, exclude):
    """A redispatch starts over from the tensors' own keys: the thread-local sets were applied on the way in."""
    tensors = DispatchKeySet(DispatchKey.Undefined)
    for tensor_key_set in tensor_keys:
        tensors = tensors | tensor_key_set
    keys, chain = _effective(tensor_keys, include, exclude), []
    while (key := keys.highestPriorityTypeId()) != DispatchKey.Undefined:
        kind = table.get(key.name, "fallthrough")
        if kind == "fallthrough":
            keys = keys & torch._C._dispatch_keyset_full_after(key)
            continue
        chain.append(key.name)
        if kind == "return":
            break
        keys = tensors & torch._C._dispatch_keyset_full_after(key)
    return chain


def _priority(name):
    return DispatchKeySet(getattr(DispatchKey, name)).raw_repr()


def _runtime_keys_by_has(keys):
    """Every named per-backend or plain runtime key the set ``has``, highest first."""
    named = [key for key in DispatchKey.__members__.values() if DispatchKeySet(key).raw_repr()]
    return sorted({key.name for key in named if keys.has(key)}, key=_priority, reverse=True)


def _walk(table, names):
    chain = []
    for name in names:
        kind = table.get(name, "fallthrough")
        if kind != "fallthrough":
            chain.append(name)
        if kind == "return":
            break
    return chain


def chain_every_backend_gets_a_turn(table, tensor_keys, include, exclude):
    return _walk(table, _runtime_keys_by_has(_effective(tensor_keys, include, exclude)))


def _printed_names(keys):
    text = str(keys)
    return {name.strip() for name in text[text.index("(") + 1:text.rindex(")")].split(",") if name.strip()}


def chain_from_printed_names(table, tensor_keys, include, exclude):
    names = set(_printed_names(include))
    for tensor_key_set in tensor_keys:
        names |= _printed_names(tensor_key_set)
    names -= _printed_names(exclude)
    return _walk(table, sorted((n for n in names if n in DispatchKey.__members__), key=_priority, reverse=True))


def chain_redispatch_follows_the_table(table, tensor_keys, include, exclude):
    """The first kernel comes from the call's keys; each redispatch goes to the op's next kernel below."""
    keys = _effective(tensor_keys, include, exclude)
    while (key := keys.highestPriorityTypeId()) != DispatchKey.Undefined:
        if table.get(key.name, "fallthrough") != "fallthrough":
            return _walk(table, sorted((name for name in table if _priority(name) <= _priority(key.name)),
                                       key=_priority, reverse=True))
        keys = keys & torch._C._dispatch_keyset_full_after(key)
    return []


def chain_peeled_into_a_list(table, tensor_keys, include, exclude):
    """The call's keys read out first (highest, then remove it), then walked against the table."""
    keys = functools.reduce(lambda a, b: a | b, tensor_keys, include) - exclude
    names = []
    while keys.highestPriorityTypeId() != DispatchKey.Undefined:
        names.append(keys.highestPriorityTypeId().name)
        keys = keys.remove(keys.highestPriorityTypeId())
    return _walk(table, names)


def chain_recursive(table, tensor_keys, include, exclude):
    """The dispatcher as a recursive function: each redispatch is a call on the keys below."""
    def run(keys):
        key = keys.highestPriorityTypeId()
        if key == DispatchKey.Undefined:
            return []
        kind = table.get(key.name)
        if kind == "return":
            return [key.name]
        below = run(keys.remove(key))
        return below if kind in (None, "fallthrough") else [key.name, *below]
    union = include
    for tensor_key_set in tensor_keys:
        union = union | tensor_key_set
    return run(union - exclude)


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


def probe_redispatches_without_own_key(lib, keys, log):
    def make_kernel(probe, index, name):
        def kernel(keyset, x):
            log.append(name)
            if name in BACKEND_KEYS:
                return x.clone()
            return probe.redispatch(keyset.remove(getattr(DispatchKey, name)), x)
        return kernel
    _install_probe(lib, keys, log, make_kernel)


def probe_redispatches_on_tensor_keys(lib, keys, log):
    def make_kernel(probe, index, name):
        def kernel(keyset, x):
            log.append(name)
            if name in BACKEND_KEYS:
                return x.clone()
            return probe.redispatch(_below(torch._C._dispatch_keys(x), name), x)
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


def _partial_probe_kernel(probe, name, mask, is_backend, log, keyset, x):
    log.append(name)
    if is_backend:
        return torch.empty_like(x).copy_(x)
    return probe.redispatch(mask & keyset, x)


def probe_partial_kernels_with_precomputed_masks(lib, keys, log):
    """functools.partial kernels; each key's "below me" mask computed once, at registration."""
    def make_kernel(probe, index, name):
        key = getattr(DispatchKey, name)
        return functools.partial(_partial_probe_kernel, probe, name, torch._C._dispatch_keyset_full_after(key),
                                 key in (DispatchKey.CPU, DispatchKey.PrivateUse1), log)
    _install_probe(lib, keys, log, make_kernel)


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


def _write_back(op, args, kwargs, cpu_args, cpu_kwargs, result, write=_write_into):
    written = {}
    for alias, chip, cpu in _written(op, args, kwargs, cpu_args, cpu_kwargs):
        write(chip, cpu)
        written[alias] = chip
    return _returns(op, result, written)


def fallback_moves_only_top_level_tensors(op, *args, **kwargs):
    cpu_args = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
    cpu_kwargs = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    return _write_back(op, args, kwargs, cpu_args, cpu_kwargs, op(*cpu_args, **cpu_kwargs))


def fallback_copies_without_resize(op, *args, **kwargs):
    return _write_back(op, args, kwargs, *_run_on_cpu(op, args, kwargs), write=lambda chip, cpu: chip.copy_(cpu))


def fallback_writes_out_kwargs_only(op, *args, **kwargs):
    cpu_args, cpu_kwargs, result = _run_on_cpu(op, args, kwargs)
    return _write_back(op, (), kwargs, (), cpu_kwargs, result)


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


def fallback_collects_writes_before_running(op, *args, **kwargs):
    """Finds the written arguments' places before the CPU call; .to("cpu") through nested lists."""
    def move(value):
        if isinstance(value, torch.Tensor) and value.device.type == "toychip":
            return value.to("cpu")
        if isinstance(value, (list, tuple)):
            return type(value)(move(v) for v in value)
        return value

    places = [(("kw", arg.name) if arg.kwarg_only or i >= len(args) else ("pos", i), arg.alias_info.before_set)
              for i, arg in enumerate(op._schema.arguments) if arg.alias_info is not None and arg.alias_info.is_write]
    cpu_args, cpu_kwargs = [move(a) for a in args], {k: move(v) for k, v in kwargs.items()}
    result = op(*cpu_args, **cpu_kwargs)
    by_alias = {}
    for (kind, where), alias in places:
        chip = args[where] if kind == "pos" else kwargs.get(where)
        if isinstance(chip, torch.Tensor):
            cpu = cpu_args[where] if kind == "pos" else cpu_kwargs[where]
            if list(chip.size()) != list(cpu.size()):
                chip.resize_(cpu.size())
            by_alias[frozenset(alias)] = chip.copy_(cpu)
    if not op._schema.returns:
        return None
    values = result if isinstance(result, tuple) else (result,)
    back = tuple(by_alias.get(frozenset(ret.alias_info.before_set)) if ret.alias_info is not None else None
                 for ret in op._schema.returns)
    back = tuple(b if b is not None else v.to("toychip") for b, v in zip(back, values))
    return back if isinstance(result, tuple) else back[0]


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


def bias_gelu_without_chip_kernel(namespace):
    return _define_bias_gelu(namespace, chip=None)


def bias_gelu_unreduced_bias_grad(namespace):
    """Returns grad_x as bias's gradient too: the engine sums it to bias's shape."""
    return _define_bias_gelu(namespace, reduce=lambda grad, bias: grad)


def bias_gelu_functional_api_in_opmath(namespace):
    """torch.library.custom_op(name, fn) without the decorator; the CPU implementation in float32 for
    16-bit inputs; saves x + bias; bias's gradient by reshape(-1, n).sum(0); in-place NumPy on the chip."""
    name = f"{namespace}::bias_gelu"

    def implementation(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        a = x + bias
        z = a.float() if a.dtype in (torch.float16, torch.bfloat16) else a
        return (0.5 * z * (1 + torch.tanh(SQRT_2_OVER_PI * (z + TANH_CUBIC * z ** 3)))).to(a.dtype)

    torch.library.custom_op(name, implementation, mutates_args=())
    torch.library.register_fake(name, lambda x, bias: x.new_empty(x.shape))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0] + inputs[1])
        ctx.bias_numel = inputs[1].numel()

    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        grad_a = grad * _tanh_slope_torch(a)
        return grad_a, grad_a.reshape(-1, ctx.bias_numel).sum(0)

    torch.library.register_autograd(name, backward, setup_context=setup_context)

    def fused(x, bias):
        a = np.add(x, bias)
        inner = a * a
        inner *= TANH_CUBIC
        inner += 1.0
        inner *= a
        inner *= SQRT_2_OVER_PI
        np.tanh(inner, out=inner)
        inner += 1.0
        inner *= a
        inner *= 0.5
        return inner

    torch.library.register_kernel(name, "toychip", toychip.chip_kernel(name, fused))
    return getattr(getattr(torch.ops, namespace), "bias_gelu")


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
    ("07.gelu_native", gelu_numpy_float64_constants,
     "a NumPy scalar such as np.sqrt(2 / np.pi) mixes with a float32 array like a Python float and keeps it float32"),
    ("07.mini_dispatcher", chain_ignoring_exclude,
     "the first kernel is at the highest key the tensors carry; the exclude set only matters to modes like inference_mode"),
    ("07.mini_dispatcher", chain_ignoring_include,
     "a call's keys come from its tensors; the thread-local include set adds nothing the tensors lack"),
    ("07.mini_dispatcher", chain_exclude_before_include,
     "the include set is added last, so a key both included and excluded takes part in the call"),
    ("07.mini_dispatcher", chain_fallthrough_runs,
     "a fallthrough is a kernel too: it runs (and shows on the path) before passing the call on"),
    ("07.mini_dispatcher", chain_redispatch_from_tensor_keys,
     "a redispatch starts over from the tensors' own keys: the thread-local sets were applied once, on the way in"),
    ("07.mini_dispatcher", chain_every_backend_gets_a_turn,
     "every per-backend key whose bits are in the set runs: a chip tensor with a CPU scalar passes AutogradPrivateUse1 and AutogradCPU"),
    ("07.mini_dispatcher", chain_from_printed_names,
     "a key set is the names it prints: the exclude set removes exactly the keys its printout names"),
    ("07.mini_dispatcher", chain_redispatch_follows_the_table,
     "a redispatch goes to the op's next kernel below, whether or not the call's key set holds that key"),
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
    ("07.probe_path", probe_redispatches_without_own_key,
     "the keys below mine are the call's key set without my own key (keyset.remove(my key))"),
    ("07.probe_path", probe_logs_highest_key_and_removes_it,
     "the key set a kernel receives has the kernel's own key as its highest, so that key names the kernel"),
    ("07.probe_path", probe_redispatches_on_tensor_keys,
     "the keys below mine come from the tensor's own key set; the keyset argument adds nothing to it"),
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
    ("07.boxed_fallback", fallback_moves_only_top_level_tensors,
     "tensors are arguments of their own; a list argument holds no chip tensors that need moving"),
    ("07.boxed_fallback", fallback_copies_without_resize,
     "copy_ resizes its destination to the source's shape, as an out= kernel does"),
    ("07.boxed_fallback", fallback_writes_out_kwargs_only,
     "only out= arguments are written; an in-place op's self already holds its new values"),
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
    ("07.bias_gelu", bias_gelu_without_chip_kernel,
     "the decorated function is registered for every backend, so the chip needs no kernel of its own"),
]

RIGHT_ANSWERS = [
    ("07.gelu_native", gelu_via_sigmoid_and_vectorized_erf,
     "tanh form as a sigmoid, erf from math.erf element by element (cast back to the input's dtype)"),
    ("07.gelu_native", gelu_kernels_from_a_table,
     "formulas looked up in a dict by approximate, taken from **kwargs; sech² as 1/cosh²"),
    ("07.gelu_native", gelu_in_float64_cast_back,
     "computes in float64 and casts the result back to the input's dtype"),
    ("07.probe_path", probe_reenters_with_key_excluded,
     "callable kernel objects that call the op again under an ExcludeDispatchKeyGuard of their key"),
    ("07.probe_path", probe_partial_kernels_with_precomputed_masks,
     "functools.partial kernels, each key's mask computed at registration, empty_like + copy_ for the copy"),
    ("07.mini_dispatcher", chain_peeled_into_a_list,
     "reads the call's keys out into a list first (highest, then remove), then walks the list against the table"),
    ("07.mini_dispatcher", chain_recursive,
     "recursive: each redispatch is a call on the keys below (remove), reduce for the union"),
    ("07.boxed_fallback", fallback_with_pytree_and_named_arguments,
     "pytree.tree_map_only, arguments bound by schema name, resize_ on every write, a list for several returns"),
    ("07.boxed_fallback", fallback_matching_returns_by_identity,
     "matches returns to written arguments by the identity of the CPU tensors instead of alias sets"),
    ("07.boxed_fallback", fallback_collects_writes_before_running,
     "locates the written arguments before the CPU call, .to('cpu'), returns looked up by alias set"),
    ("07.bias_gelu", bias_gelu_with_library_functions,
     "torch.library.register_fake/kernel/autograd by name, new_empty fake, aten::gelu_backward, torch.ops packet"),
    ("07.bias_gelu", bias_gelu_by_formula_and_sigmoid,
     "formulas written out, sigmoid on the chip, empty with explicit dtype/device, sum over leading dims"),
    ("07.bias_gelu", bias_gelu_unreduced_bias_grad,
     "returns grad_x unreduced as bias's gradient; autograd's engine sums it to bias's shape"),
    ("07.bias_gelu", bias_gelu_functional_api_in_opmath,
     "torch.library.custom_op(name, fn) and register_* by name, float32 opmath on CPU, in-place NumPy kernel"),
]
