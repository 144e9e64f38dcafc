"""FX graphs as plain data, and back, with nothing executable smuggled along.

Learner code returns a ``GraphModule``; the sandbox :func:`encode` s it into names,
numbers and tensors, and the trusted side :func:`decode` s it into a fresh
``GraphModule`` whose call targets come only from an allowlist (torch and ATen ops,
``torch.nn.functional``, ``operator``, ``math``, Tensor methods, ``torch.nn`` leaf
modules). The trusted side then runs and inspects *its own* rebuilt graph.
"""
from __future__ import annotations

import builtins
import importlib
import inspect
import math
import operator

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F


class GraphCodecError(ValueError):
    """A graph that cannot cross: an unknown target, argument or module."""


# --- encoding (runs next to learner code) --------------------------------------------

PUBLIC_NAMESPACES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft",
                     "operator", "math", "builtins")


def _target_name(target) -> str:
    """``op:aten.add.Tensor`` or ``fn:MODULE:NAME``, preferring public spellings (torch.relu)."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return "op:" + str(target)
    name = getattr(target, "__name__", None)
    for namespace in PUBLIC_NAMESPACES:
        if name is not None and getattr(importlib.import_module(namespace), name, None) is target:
            return f"fn:{namespace}:{name}"
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if module is None or qualname is None:
        raise GraphCodecError(f"call target {target!r} has no importable name")
    return f"fn:{module}:{qualname}"


def _tensor_method_name(target) -> str | None:
    """``"mean"`` for ``torch.Tensor.mean`` (a method called as a function), else None."""
    name = getattr(target, "__name__", None)
    return name if name is not None and getattr(torch.Tensor, name, None) is target else None


def _encode_arg(value):
    if isinstance(value, fx.Node):
        return {"node": value.name}
    if type(value) in (type(None), bool, int, float, str):
        return value
    if isinstance(value, (tuple, list)):
        return {"tuple" if isinstance(value, tuple) else "list": [_encode_arg(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[str(k), _encode_arg(v)] for k, v in value.items()]}
    if isinstance(value, slice):
        return {"slice": [_encode_arg(value.start), _encode_arg(value.stop), _encode_arg(value.step)]}
    if isinstance(value, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return {"torch": str(value)}
    if value is Ellipsis:
        return {"ellipsis": True}
    if type(value) is torch.Tensor:
        return {"tensor": value.detach().clone()}
    raise GraphCodecError(f"argument of type {type(value).__name__} cannot be serialised")


def _module_config(module: nn.Module) -> dict:
    """Constructor arguments recovered from attributes of the same name."""
    config = {}
    for name in list(inspect.signature(type(module).__init__).parameters)[1:]:
        if name in ("device", "dtype"):
            continue
        if name == "bias":
            config[name] = module.bias is not None if isinstance(getattr(module, "bias", None), (torch.Tensor, type(None))) else module.bias
        elif hasattr(module, name):
            config[name] = _encode_arg(getattr(module, name))
    return config


def encode(gm: fx.GraphModule) -> dict:
    """Plain-data form of ``gm``: its nodes, the leaf modules it calls and its attributes."""
    nodes, modules, attributes = [], {}, {}
    for node in gm.graph.nodes:
        op, target = node.op, node.target
        if op == "call_function" and _tensor_method_name(target) is not None:
            op, target = "call_method", _tensor_method_name(target)  # torch.Tensor.mean(x) is x.mean()
        elif op == "call_function":
            target = _target_name(target)
        elif node.op == "call_module":
            module = gm.get_submodule(target)
            modules[target] = {
                "class": f"{type(module).__module__}:{type(module).__qualname__}",
                "config": _module_config(module),
                "state": {k: v.detach().clone() for k, v in module.state_dict().items()},
                "training": module.training,
            }
        elif node.op == "get_attr":
            value = fx.graph_module._get_attr(gm, target) if hasattr(fx.graph_module, "_get_attr") else gm.get_parameter(target)
            if not isinstance(value, torch.Tensor):
                raise GraphCodecError(f"get_attr {target!r} is not a tensor")
            attributes[target] = value.detach().clone()
        nodes.append({"name": node.name, "op": op, "target": target,
                      "args": _encode_arg(node.args), "kwargs": _encode_arg(node.kwargs)})
    return {"nodes": nodes, "modules": modules, "attributes": attributes}


# --- decoding (trusted side) ------------------------------------------------------------

IMPORTABLE_NAMESPACES = set(PUBLIC_NAMESPACES) | {
    "_operator", "torch.functional", "torch._C._nn", "torch._C._fft", "torch._C._linalg", "torch._C._special"}
# operator.call / methodcaller / attrgetter would let a graph call arbitrary methods.
_FORBIDDEN_NAMES = {"save", "load", "compile", "hub", "jit", "from_file", "set_default_device",
                    "call", "methodcaller", "attrgetter"}
# getattr is allowed only for these tensor attributes (what symbolic tracing records).
SAFE_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "T", "mT", "real", "imag", "layout", "requires_grad"}


def _allowed_functions() -> set[int]:
    namespaces = [torch._C._VariableFunctions, torch._C._nn, torch._C._fft, torch._C._linalg,
                  torch._C._special, F, operator, math, torch.functional]
    allowed = set()
    for space in namespaces:
        for name in dir(space):
            value = getattr(space, name, None)
            if callable(value) and not isinstance(value, type) and name not in _FORBIDDEN_NAMES:
                allowed.add(id(value))
    for name in dir(torch):
        value = getattr(torch, name, None)
        if callable(value) and not isinstance(value, type) and name not in _FORBIDDEN_NAMES \
                and getattr(value, "__module__", "") in ("torch", "torch.functional", "torch._C._VariableFunctions"):
            allowed.add(id(value))
    allowed.add(id(builtins.getattr))
    return allowed


_ALLOWED: set[int] = set()


def _resolve_function(name: str):
    global _ALLOWED
    kind, _, rest = name.partition(":")
    if kind == "op":
        namespace, _, op = rest.partition(".")
        if namespace not in ("aten", "prims"):
            raise GraphCodecError(f"operator {rest!r} is not an ATen operator")
        value = torch.ops
        for part in rest.split("."):
            value = getattr(value, part, None)
            if value is None:
                raise GraphCodecError(f"unknown operator {rest!r}")
        return value
    module_name, _, qualname = rest.partition(":")
    if module_name not in IMPORTABLE_NAMESPACES:
        # Importing an arbitrary module would run its code on the trusted side.
        raise GraphCodecError(f"function {module_name}.{qualname} is not a torch/operator function")
    if qualname.split(".")[-1] in _FORBIDDEN_NAMES:
        raise GraphCodecError(f"function {qualname!r} is not allowed in a graded graph")
    try:
        value = importlib.import_module(module_name)
        for part in qualname.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError):
        raise GraphCodecError(f"function {module_name}.{qualname} cannot be found") from None
    _ALLOWED = _ALLOWED or _allowed_functions()
    if id(value) not in _ALLOWED:
        raise GraphCodecError(f"function {module_name}.{qualname} is not a torch/operator function")
    return value


def _decode_arg(value, nodes: dict):
    if type(value) in (type(None), bool, int, float, str):
        return value
    if type(value) in (list, tuple):
        raise GraphCodecError("bare lists are not part of the encoding")
    (kind, data), = value.items()
    if kind == "node":
        if data not in nodes:
            raise GraphCodecError(f"argument refers to unknown node {data!r}")
        return nodes[data]
    if kind in ("tuple", "list"):
        items = [_decode_arg(v, nodes) for v in data]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {k: _decode_arg(v, nodes) for k, v in data}
    if kind == "slice":
        return slice(*(_decode_arg(v, nodes) for v in data))
    if kind == "torch":
        text = data.removeprefix("torch.")
        if text.startswith(("cpu", "cuda", "meta")):
            return torch.device(text)
        resolved = getattr(torch, text, None)
        if not isinstance(resolved, (torch.dtype, torch.memory_format, torch.layout)):
            raise GraphCodecError(f"unknown torch constant {data!r}")
        return resolved
    if kind == "ellipsis":
        return Ellipsis
    if kind == "tensor":
        return data
    raise GraphCodecError(f"unknown argument kind {kind!r}")


def _build_module(spec: dict) -> nn.Module:
    module_name, _, qualname = spec["class"].partition(":")
    if not module_name.startswith("torch.nn.modules.") or "." in qualname:
        raise GraphCodecError(f"module class {spec['class']} is not a torch.nn layer")
    cls = getattr(importlib.import_module(module_name), qualname, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)) or issubclass(cls, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
        raise GraphCodecError(f"module class {spec['class']} is not a leaf torch.nn layer")
    config = {k: _decode_arg(v, {}) for k, v in spec["config"].items()}
    try:
        module = cls(**config)
        # assign: the saved tensors themselves, so their dtype is kept whatever the
        # default dtype of the decoding process is
        module.load_state_dict(spec["state"], strict=True, assign=True)
    except Exception as error:
        raise GraphCodecError(f"cannot rebuild {qualname}: {error}") from None
    return module.train(bool(spec["training"]))


def _install(root: nn.Module, path: str, leaf) -> None:
    *parents, name = path.split(".")
    owner = root
    for part in parents:
        if not hasattr(owner, part):
            owner.add_module(part, nn.Module())
        owner = getattr(owner, part)
    if isinstance(leaf, nn.Module):
        owner.add_module(name, leaf)
    else:
        owner.register_buffer(name, leaf)


def decode(data: dict) -> fx.GraphModule:
    """A fresh ``GraphModule`` from :func:`encode` output; raises :class:`GraphCodecError`."""
    try:
        root = nn.Module()
        for path, spec in data["modules"].items():
            _install(root, path, _build_module(spec))
        for path, tensor in data["attributes"].items():
            _install(root, path, tensor)
        graph, nodes = fx.Graph(), {}
        for spec in data["nodes"]:
            op, target = spec["op"], spec["target"]
            if op not in ("placeholder", "get_attr", "call_function", "call_module", "call_method", "output"):
                raise GraphCodecError(f"unknown opcode {op!r}")
            if op == "call_function":
                target = _resolve_function(target)
                if target is builtins.getattr and (len(spec["args"].get("tuple", ())) != 2
                                                   or spec["args"]["tuple"][1] not in SAFE_ATTRIBUTES):
                    raise GraphCodecError("getattr is allowed only for tensor attributes like shape and dtype")
            elif op == "call_method" and (not isinstance(target, str) or not callable(getattr(torch.Tensor, target, None))):
                raise GraphCodecError(f"{target!r} is not a Tensor method")
            args = _decode_arg(spec["args"], nodes)
            kwargs = _decode_arg(spec["kwargs"], nodes)
            nodes[spec["name"]] = graph.create_node(op, target, args, kwargs, name=spec["name"])
        gm = fx.GraphModule(root, graph)
        gm.graph.lint()
        return gm
    except GraphCodecError:
        raise
    except Exception as error:  # malformed structure from untrusted side
        raise GraphCodecError(f"malformed graph ({type(error).__name__}: {error})") from None


# --- shipping inputs to the sandbox ----------------------------------------------------

GRAPH_MARK = "__fx_graph__"


def pack(value):
    """Replace every GraphModule inside ``value`` by its encoding (pickling a traced
    GraphModule re-traces it on load, which is slow and fails for ATen graphs)."""
    if isinstance(value, fx.GraphModule):
        return {GRAPH_MARK: encode(value)}
    if isinstance(value, dict):
        return {k: pack(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(pack(v) for v in value)
    return value


def unpack(value):
    """Inverse of :func:`pack`."""
    if isinstance(value, dict):
        if set(value) == {GRAPH_MARK}:
            return decode(value[GRAPH_MARK])
        return {k: unpack(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(unpack(v) for v in value)
    return value
