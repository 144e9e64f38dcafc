"""Mixed precision on the chip: ``torch.autocast("toychip")`` and its dispatch key.

Autocast is a dispatch key per backend (``AutocastPrivateUse1`` here), switched on by
removing it from the thread-local exclude set. Like CUDA, the chip registers a
*fallthrough* for it (ops autocast leaves alone skip the key at no cost) and a kernel for
each op on CUDA's lists (``ATen/autocast_mode.h`` of torch 2.13), by the list's policy:

- lower precision: the matmul and convolution family runs in the autocast dtype;
- float32: ops whose 16-bit results lose too much (``exp``, ``log``, ``pow``, norms, losses);
- float32 through ``dtype=``: ``softmax`` and reductions accumulate in float32 unless the
  caller chose a dtype; ``norm`` is called as its overload that takes one;
- promote: ops that need their floating inputs in one dtype get the widest of them;
- banned: ``binary_cross_entropy`` raises (unsafe in 16 bits, as on CUDA).

A kernel casts the floating chip tensors among the inputs (float64 ones stay as they are)
and calls the op again with the autocast key excluded::

    with torch.autocast("toychip", dtype=torch.bfloat16):
        y = x @ w          # AutocastPrivateUse1: cast x, w -> bf16; then mm on the chip
        p = y.softmax(-1)  # AutocastPrivateUse1: softmax(y, -1, dtype=torch.float32)

Chapter 07 traces this path; the chip computes 16-bit floats in float32 (toychip.dtypes).
Unlike CUDA, the chip does not cache the 16-bit copies of weights between calls.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch._C import DispatchKey, DispatchKeySet

from .spec import NAME

# "op" is the op's default overload, "op.overload" another one.
LOWER_PRECISION_FP = (
    "_convolution.deprecated", "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d.input", "conv_transpose3d.input", "convolution", "prelu", "addmm", "addmv", "addr",
    "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul",
    "linalg_multi_dot", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell",
    "rnn_tanh_cell", "rnn_relu_cell", "_scaled_dot_product_flash_attention", "scaled_dot_product_attention",
)
FP32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus", "layer_norm",
    "native_layer_norm", "rms_norm", "group_norm", "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim",
    "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d", "_upsample_nearest_exact2d",
    "upsample_nearest3d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "_upsample_bilinear2d_aa", "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa",
)
FP32_SET_OPT_DTYPE = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum", "sum.dim_IntList",
)
# op -> its overload with a dtype argument, called with dtype=float32
FP32_APPEND_DTYPE = {"norm.Scalar": "norm.ScalarOpt_dtype", "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype"}
PROMOTE = (
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler", "index_put", "tensordot",
    "scatter_add",
)
BANNED = {
    "binary_cross_entropy": (
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
        "A sigmoid followed by this loss overflows in 16 bits: compute both in one op with "
        "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, "
        "which autocast runs in float32."
    ),
}

_AUTOCAST_KEYS = DispatchKeySet(DispatchKey.AutocastPrivateUse1)

Call = tuple[torch._ops.OpOverload, tuple, dict]


def _overload(name: str) -> torch._ops.OpOverload:
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _eligible(value: Any) -> bool:
    """Autocast casts floating chip tensors, and leaves float64 alone (it asked for that precision)."""
    return (isinstance(value, torch.Tensor) and value.device.type == NAME and value.is_floating_point()
            and value.dtype != torch.float64)


def _cast(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(item, dtype) for item in value)
    return value.to(dtype) if _eligible(value) else value


def _cast_inputs(op, args: tuple, kwargs: dict, dtype: torch.dtype) -> Call:
    return op, _cast(args, dtype), {name: _cast(value, dtype) for name, value in kwargs.items()}


def _lower_precision(op, args: tuple, kwargs: dict) -> Call:
    return _cast_inputs(op, args, kwargs, torch.get_autocast_dtype(NAME))


def _fp32(op, args: tuple, kwargs: dict) -> Call:
    return _cast_inputs(op, args, kwargs, torch.float32)


def _fp32_set_opt_dtype(op, args: tuple, kwargs: dict) -> Call:
    """Ask for a float32 result where the caller left ``dtype`` unset (and the input is one autocast casts)."""
    if not _eligible(args[0]):
        return op, args, kwargs
    index = [argument.name for argument in op._schema.arguments].index("dtype")
    if index < len(args):
        dtype = torch.float32 if args[index] is None else args[index]
        return op, (*args[:index], dtype, *args[index + 1:]), kwargs
    if kwargs.get("dtype") is None:
        kwargs = {**kwargs, "dtype": torch.float32}
    return op, args, kwargs


def _fp32_append_dtype(with_dtype: torch._ops.OpOverload):
    """Call ``with_dtype``, the op's overload that takes a dtype, asking for float32."""
    def policy(op, args: tuple, kwargs: dict) -> Call:
        if not _eligible(args[0]):
            return op, args, kwargs
        positional = [argument for argument in op._schema.arguments if not argument.kwarg_only]
        defaults = [argument.default_value for argument in positional[len(args):]]
        return with_dtype, (*args, *defaults), {**kwargs, "dtype": torch.float32}
    return policy


def _widest_dtype(values, dtype: torch.dtype) -> torch.dtype:
    """float32 if any eligible input is float32, else the autocast dtype (16-bit inputs must match it)."""
    for value in values:
        if isinstance(value, (list, tuple)):
            dtype = _widest_dtype(value, dtype)
        elif _eligible(value) and value.dtype != dtype and torch.float32 not in (dtype, value.dtype):
            raise RuntimeError(f"toychip autocast: a {value.dtype} input inside autocast({dtype}): "
                               f"cast it to {dtype} or to torch.float32 first")
        elif _eligible(value):
            dtype = torch.promote_types(dtype, value.dtype)
    return dtype


def _promote(op, args: tuple, kwargs: dict) -> Call:
    dtype = _widest_dtype([*args, *kwargs.values()], torch.get_autocast_dtype(NAME))
    return _cast_inputs(op, args, kwargs, dtype)


def _autocast_kernel(op: torch._ops.OpOverload, policy: Callable[..., Call]):
    """The kernel of one op: rewrite the call by its policy, make it with the autocast key excluded."""
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_KEYS):
            target, args, kwargs = policy(op, args, kwargs)
            return target(*args, **kwargs)
    kernel.__name__ = f"autocast_{op.__name__}"
    return kernel


def _banned_kernel(message: str):
    def kernel(*args, **kwargs):
        raise RuntimeError(message)
    return kernel


def _policies() -> dict[str, Callable[..., Call]]:
    """Every op on the lists -> its policy."""
    return {
        **dict.fromkeys(LOWER_PRECISION_FP, _lower_precision),
        **dict.fromkeys(FP32, _fp32),
        **dict.fromkeys(FP32_SET_OPT_DTYPE, _fp32_set_opt_dtype),
        **{name: _fp32_append_dtype(_overload(target)) for name, target in FP32_APPEND_DTYPE.items()},
        **dict.fromkeys(PROMOTE, _promote),
    }


_LIBS: list[torch.library.Library] = []


def register() -> None:
    """Fallthrough for every op, a kernel for each op on the lists (idempotent)."""
    if _LIBS:
        return
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    kernels = torch.library.Library("aten", "IMPL")
    for name, policy in _policies().items():
        kernels.impl(name, _autocast_kernel(_overload(name), policy), "AutocastPrivateUse1")
    for name, message in BANNED.items():
        kernels.impl(name, _banned_kernel(message), "AutocastPrivateUse1")
    _LIBS.extend([fallback, kernels])
