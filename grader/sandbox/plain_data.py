"""The only values allowed to cross from learner code to the trusted side.

Artifacts travel as ``torch.save`` files and are read back with ``weights_only=True``,
which already refuses arbitrary classes and pickled payloads; :func:`require_plain`
then refuses anything that merely looks plain (tensor subclasses, bool-like ints, odd
dict keys), so a comparison never calls a method learner code could have defined.
"""
from __future__ import annotations

import io

import torch

SCALARS = (type(None), bool, int, float, str, bytes)
MAX_DEPTH = 64


class NotPlainData(ValueError):
    """An artifact held something other than plain data."""


def type_name(value) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def require_plain(value, where: str = "返回值", depth: int = 0):
    """Return ``value`` if it is plain data all the way down; raise :class:`NotPlainData`
    naming (in Chinese, for feedback) where the first other value sits and its type."""
    if depth > MAX_DEPTH:
        raise NotPlainData(f"{where} 嵌套太深")
    kind = type(value)
    if kind in SCALARS:
        return value
    if kind is torch.Tensor:
        if value.layout is not torch.strided or value.is_quantized or value.device.type != "cpu":
            raise NotPlainData(f"{where} 是 {value.device.type} 上的 {value.layout} 张量，只接受 CPU 上的普通稠密张量")
        return value
    if kind in (list, tuple):
        for index, item in enumerate(value):
            require_plain(item, f"{where}[{index}]", depth + 1)
        return value
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise NotPlainData(f"{where} 的键 {key!r} 的类型是 {type_name(key)}，dict 的键只能是 str")
            require_plain(item, f"{where}[{key!r}]", depth + 1)
        return value
    raise NotPlainData(f"{where} 的类型是 {type_name(value)}")


def dumps(value) -> bytes:
    buffer = io.BytesIO()
    torch.save(require_plain(value), buffer)
    return buffer.getvalue()


def loads(data: bytes):
    """Read an artifact written by untrusted code: no pickled objects, plain data only."""
    try:
        value = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as error:  # malformed or malicious bytes
        raise NotPlainData(f"结果无法被安全读取（{type(error).__name__}）") from None
    return require_plain(value)
