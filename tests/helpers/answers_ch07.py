"""Plausible wrong answers to chapter 07's exercises, each with the belief it embodies; the checks must reject each one.

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch._C import DispatchKey
from torch.library import custom_op

import toychip

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _gelu_tanh(a):
    return 0.5 * a * (1 + np.tanh(SQRT_2_OVER_PI * (a + 0.044715 * a ** 3)))


def gelu_forward_only():
    """Registers the forward kernel only: the backward still falls back to the CPU."""
    erf = toychip.kernels.KERNELS["erf"].fn

    def gelu(a, approximate="none"):
        return _gelu_tanh(a) if approximate == "tanh" else 0.5 * a * (1 + erf(a / math.sqrt(2)))
    toychip.register_kernel("aten::gelu", gelu)


def gelu_always_tanh():
    """Uses the tanh approximation whatever ``approximate`` says (off by ~1e-3 for 'none')."""
    def gelu(a, approximate="none"):
        return _gelu_tanh(a)

    def gelu_backward(grad, a, approximate="none"):
        t = np.tanh(SQRT_2_OVER_PI * (a + 0.044715 * a ** 3))
        return grad * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * a * a))
    toychip.register_kernel("aten::gelu", gelu)
    toychip.register_kernel("aten::gelu_backward", gelu_backward)


def keys_ignoring_thread_local_state(tensors):
    """Only the tensors' own keys: forgets the thread-local include and exclude sets."""
    keys = torch._C._dispatch_keys(tensors[0])
    for t in tensors[1:]:
        keys = keys | torch._C._dispatch_keys(t)
    names = []
    while (key := keys.highestPriorityTypeId()) != DispatchKey.Undefined:
        names.append(key.name)
        keys = keys.remove(key)
    return names


def keys_in_printed_order(tensors):
    """Reads the names off the printed key set, which lists the lowest priority first."""
    keys = torch._C._dispatch_tls_local_include_set()
    for t in tensors:
        keys = keys | torch._C._dispatch_keys(t)
    keys = keys - torch._C._dispatch_tls_local_exclude_set()
    text = str(keys)
    return [k.strip() for k in text[text.index("(") + 1:text.rindex(")")].split(",") if k.strip()]


def _probe(lib, keys, log, *, log_after: bool, redispatch: bool):
    lib.define("probe(Tensor x) -> Tensor")
    probe = getattr(torch.ops, lib.ns).probe.default

    def kernel_at(name):
        key = getattr(DispatchKey, name)

        def kernel(keyset, x):
            if not log_after:
                log.append(name)
            if name in ("CPU", "PrivateUse1") or not redispatch:
                result = x.clone()
            else:
                result = probe.redispatch(keyset & torch._C._dispatch_keyset_full_after(key), x)
            if log_after:
                log.append(name)
            return result
        return kernel

    for name in keys:
        lib.impl("probe", kernel_at(name), name, with_keyset=True)


def probe_logs_after_redispatch(lib, keys, log):
    """Appends the key after the redispatch returns: the path comes out backwards."""
    _probe(lib, keys, log, log_after=True, redispatch=True)


def probe_without_redispatch(lib, keys, log):
    """Every kernel computes the result itself: the dispatcher never goes below the first key."""
    _probe(lib, keys, log, log_after=False, redispatch=False)


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


def fallback_results_only(op, *args, **kwargs):
    """Moves the results back but never writes into the arguments the op mutates (out=, self)."""
    result = op(*_on_cpu(list(args)), **{k: _on_cpu(v) for k, v in kwargs.items()})
    return _on_chip(result)


def fallback_positional_writes_only(op, *args, **kwargs):
    """Writes back a mutated ``self`` but forgets the kwarg-only ``out=`` arguments."""
    cpu_args = _on_cpu(list(args))
    result = op(*cpu_args, **{k: _on_cpu(v) for k, v in kwargs.items()})
    for i, arg in enumerate(op._schema.arguments[:len(args)]):
        if arg.alias_info is not None and arg.alias_info.is_write and isinstance(args[i], torch.Tensor):
            args[i].copy_(cpu_args[i])
            return args[i]
    return _on_chip(result)


def _bias_gelu(namespace, *, fake: bool, exact_backward: bool):
    @custom_op(f"{namespace}::bias_gelu", mutates_args=())
    def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.gelu(x + bias, approximate="tanh")

    if fake:
        bias_gelu.register_fake(lambda x, bias: torch.empty_like(x))
    bias_gelu.register_kernel("toychip")(
        toychip.chip_kernel(f"{namespace}::bias_gelu", lambda x, bias: _gelu_tanh(x + bias)))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        a = x + bias
        if exact_backward:
            slope = 0.5 * (1 + torch.erf(a / math.sqrt(2))) + a * torch.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
        else:
            t = torch.tanh(SQRT_2_OVER_PI * (a + 0.044715 * a ** 3))
            slope = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * a * a)
        grad_a = grad * slope
        return grad_a, grad_a.sum_to_size(bias.shape)

    bias_gelu.register_autograd(backward, setup_context=setup_context)
    return bias_gelu


def bias_gelu_without_fake(namespace):
    """No register_fake: fake tensors (opcheck, torch.compile) cannot run the op."""
    return _bias_gelu(namespace, fake=False, exact_backward=False)


def bias_gelu_exact_backward(namespace):
    """Forward uses the tanh approximation, backward the exact (erf) derivative: ~1e-3 off."""
    return _bias_gelu(namespace, fake=True, exact_backward=True)


WRONG_ANSWERS = [
    ("07.gelu_native", gelu_forward_only,
     "Registers the forward kernel only: the backward still falls back to the CPU."),
    ("07.gelu_native", gelu_always_tanh,
     "Uses the tanh approximation whatever ``approximate`` says (off by ~1e-3 for 'none')."),
    ("07.dispatch_keys", keys_ignoring_thread_local_state,
     "Only the tensors' own keys: forgets the thread-local include and exclude sets."),
    ("07.dispatch_keys", keys_in_printed_order,
     "Reads the names off the printed key set, which lists the lowest priority first."),
    ("07.probe_path", probe_logs_after_redispatch,
     "Appends the key after the redispatch returns: the path comes out backwards."),
    ("07.probe_path", probe_without_redispatch,
     "Every kernel computes the result itself: the dispatcher never goes below the first key."),
    ("07.boxed_fallback", fallback_results_only,
     "Moves the results back but never writes into the arguments the op mutates (out=, self)."),
    ("07.boxed_fallback", fallback_positional_writes_only,
     "Writes back a mutated ``self`` but forgets the kwarg-only ``out=`` arguments."),
    ("07.bias_gelu", bias_gelu_without_fake,
     "No register_fake: fake tensors (opcheck, torch.compile) cannot run the op."),
    ("07.bias_gelu", bias_gelu_exact_backward,
     "Forward uses the tanh approximation, backward the exact (erf) derivative: ~1e-3 off."),
]
