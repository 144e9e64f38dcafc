"""Reference solutions of chapter 07 (the dispatcher).

Each function body is injected into the instructor's copy of
``notebooks/07_dispatcher.ipynb``, so a body may use only what the notebook imports:
``math``, ``numpy as np``, ``torch``, ``F``, ``DispatchKey``, ``DispatchKeySet``,
``Library``, ``custom_op`` and ``toychip``.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch._C import DispatchKey, DispatchKeySet
from torch.library import Library, custom_op

import toychip


def register_gelu_kernels() -> None:
    """Give the toy chip native kernels for ``aten::gelu`` and ``aten::gelu_backward``.

    gelu(a) = a * Phi(a) with Phi(a) = (1 + erf(a / sqrt 2)) / 2 ("none"), or the tanh
    approximation 0.5 a (1 + tanh(k (a + 0.044715 a^3))), k = sqrt(2 / pi) ("tanh");
    the backward multiplies the incoming gradient by the derivative of either.
    """
    erf = toychip.kernels.KERNELS["erf"].fn
    k = math.sqrt(2 / math.pi)

    def gelu(a, approximate="none"):
        if approximate == "tanh":
            return 0.5 * a * (1 + np.tanh(k * (a + 0.044715 * a ** 3)))
        return 0.5 * a * (1 + erf(a / math.sqrt(2)))

    def gelu_backward(grad, a, approximate="none"):
        if approximate == "tanh":
            t = np.tanh(k * (a + 0.044715 * a ** 3))
            slope = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * 0.044715 * a * a)
        else:
            slope = 0.5 * (1 + erf(a / math.sqrt(2))) + a * np.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)
        return grad * slope

    toychip.register_kernel("aten::gelu", gelu)
    toychip.register_kernel("aten::gelu_backward", gelu_backward)


def install_probe(lib: Library, keys: list, log: list) -> None:
    """Define ``probe(Tensor x) -> Tensor`` in ``lib``; at each key log it and redispatch.

    The backend keys (CPU, PrivateUse1) end the chain with ``x.clone()``.
    """
    lib.define("probe(Tensor x) -> Tensor")
    probe = getattr(torch.ops, lib.ns).probe.default

    def kernel_at(name):
        key = getattr(DispatchKey, name)

        def kernel(keyset, x):
            log.append(name)
            if name in ("CPU", "PrivateUse1"):
                return x.clone()
            return probe.redispatch(keyset & torch._C._dispatch_keyset_full_after(key), x)
        return kernel

    for name in keys:
        lib.impl("probe", kernel_at(name), name, with_keyset=True)


def dispatch_chain(table: dict, tensor_keys: list, include: DispatchKeySet, exclude: DispatchKeySet) -> list:
    """The keys whose kernels a call runs, in order, as the dispatcher picks them.

    The call's key set is the tensors' keys with the thread-local include set added and the
    exclude set taken away (exclude wins). The highest key runs first; a fallthrough, or a
    key without a kernel, is passed over; a kernel that redispatches hands the call to the
    keys below its own; a kernel that returns ends the call.
    """
    keys = include
    for tensor_key_set in tensor_keys:
        keys = keys | tensor_key_set
    keys = keys - exclude
    chain = []
    while (key := keys.highestPriorityTypeId()) != DispatchKey.Undefined:
        kind = table.get(key.name, "fallthrough")
        if kind != "fallthrough":
            chain.append(key.name)
        if kind == "return":
            break
        keys = keys & torch._C._dispatch_keyset_full_after(key)
    return chain


def chip_fallback(op, *args, **kwargs):
    """A boxed CPU fallback that honours the schema's alias annotations.

    Chip tensors go to the CPU, the op runs there; every argument marked written
    (``Tensor(a!)``: in-place ``self``, ``out=``) gets the new values back, and a result
    that aliases such an argument *is* that argument; other results move to the chip.
    (Written tensor lists, ``Tensor(a!)[]``, are outside the exercise.)
    """
    def to_cpu(value):
        if isinstance(value, torch.Tensor) and value.device.type == "toychip":
            return value.cpu()
        if isinstance(value, (list, tuple)):
            return type(value)(to_cpu(v) for v in value)
        return value

    def to_chip(value):
        if isinstance(value, torch.Tensor):
            return value.to("toychip")
        if isinstance(value, (list, tuple)):
            return type(value)(to_chip(v) for v in value)
        return value

    cpu_args = [to_cpu(a) for a in args]
    cpu_kwargs = {k: to_cpu(v) for k, v in kwargs.items()}
    result = op(*cpu_args, **cpu_kwargs)

    written = {}
    for i, arg in enumerate(op._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        if arg.kwarg_only or i >= len(args):
            chip, cpu = kwargs.get(arg.name), cpu_kwargs.get(arg.name)
        else:
            chip, cpu = args[i], cpu_args[i]
        if isinstance(chip, torch.Tensor):
            if chip.shape != cpu.shape:
                chip.resize_(cpu.shape)
            chip.copy_(cpu)
            written[frozenset(arg.alias_info.before_set)] = chip

    returns = op._schema.returns
    if not returns:
        return None
    results = result if isinstance(result, tuple) else (result,)
    out = []
    for ret, value in zip(returns, results):
        alias = frozenset(ret.alias_info.before_set) if ret.alias_info is not None else None
        out.append(written[alias] if alias in written else to_chip(value))
    return tuple(out) if isinstance(result, tuple) else out[0]


def define_bias_gelu(namespace: str):
    """``{namespace}::bias_gelu(x, bias) = gelu(x + bias, approximate="tanh")`` as a custom op.

    CPU implementation, a fake (meta) kernel for compilers, a backward for x and bias,
    and one fused NumPy kernel on the toy chip. Returns the op.
    """
    k = math.sqrt(2 / math.pi)

    @custom_op(f"{namespace}::bias_gelu", mutates_args=())
    def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.gelu(x + bias, approximate="tanh")

    @bias_gelu.register_fake
    def _(x, bias):
        return torch.empty_like(x)

    def fused(x, bias):
        a = x + bias
        return 0.5 * a * (1 + np.tanh(k * (a + 0.044715 * a ** 3)))

    bias_gelu.register_kernel("toychip")(toychip.chip_kernel(f"{namespace}::bias_gelu", fused))

    def setup_context(ctx, inputs, output):
        x, bias = inputs
        ctx.save_for_backward(x, bias)

    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        a = x + bias
        t = torch.tanh(k * (a + 0.044715 * a ** 3))
        grad_a = grad * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * 0.044715 * a * a))
        return grad_a, grad_a.sum_to_size(bias.shape)

    bias_gelu.register_autograd(backward, setup_context=setup_context)
    return bias_gelu
