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


def require_plain(value, where: str = "artifact", depth: int = 0):
    """Return ``value`` if it is plain data all the way down; raise :class:`NotPlainData`."""
    if depth > MAX_DEPTH:
        raise NotPlainData(f"{where} is nested too deeply")
    kind = type(value)
    if kind in SCALARS:
        return value
    if kind is torch.Tensor:
        if value.layout is not torch.strided or value.is_quantized or value.device.type != "cpu":
            raise NotPlainData(f"{where} must be a dense CPU tensor")
        return value
    if kind in (list, tuple):
        for index, item in enumerate(value):
            require_plain(item, f"{where}[{index}]", depth + 1)
        return value
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise NotPlainData(f"{where} has a non-string key of type {type(key).__name__}")
            require_plain(item, f"{where}[{key!r}]", depth + 1)
        return value
    raise NotPlainData(f"{where} has a value of type {kind.__module__}.{kind.__qualname__}")


def dumps(value) -> bytes:
    buffer = io.BytesIO()
    torch.save(require_plain(value), buffer)
    return buffer.getvalue()


def loads(data: bytes):
    """Read an artifact written by untrusted code: no pickled objects, plain data only."""
    try:
        value = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as error:  # malformed or malicious bytes
        raise NotPlainData(f"artifact could not be read safely ({type(error).__name__})") from None
    return require_plain(value)
