"""Operator registration driven by a backend YAML, the way torchgen registers a vendor's ops.

A vendor declares the ATen ops its chip implements in a backend YAML (torch_npu's
npu_native_functions.yaml, torch_xla's xla_native_functions.yaml, OpenReg's
openreg_native_functions.yaml). torchgen's ``parse_backend_yaml`` (``torchgen/gen_backend_stubs.py``)
reads it, fails when a declared op has no kernel, and generates the
``TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)`` block that registers exactly those ops.
:func:`register` does the same in Python: the kernels come from the kernel library
(:func:`toychip.op_table.eager_kernels`), the declaration from ``native_functions.yaml``.
An ATen op the YAML does not declare reaches the boxed CPU fallback.

The keys torch 2.13's parser accepts, and what each does here:

* ``backend``, ``cpp_namespace``, ``supported``, ``autograd``: as in torchgen;
* ``device_guard: true``: each kernel runs with the current device set to its first chip
  tensor's device (torchgen wraps each generated kernel in a ``DeviceGuard``);
* ``symint``: ops whose kernels take ``SymInt`` sizes; each must also be declared (Python
  kernels take symbolic sizes anyway, so nothing else changes);
* a ``supported`` entry with ``structured: true`` (OpenReg's ``maximum.out``): the entry is an
  ``out=`` overload; its functional overload is registered too, built as torchgen's structured
  wrappers are: the output's shape from the op's meta function, then the ``out=`` kernel;
* ``use_out_as_primary``, ``class_name``, ``extra_headers``: only shape the generated C++,
  which the chip has none of; checked and kept on the declaration (torch 2.13's parser lists
  ``extra_headers`` in its error message but never reads it, so it rejects a YAML that has it);
* ``full_codegen``, ``non_native``, ``ir_gen``: read by the lazy-tensor generator
  (``gen_lazy_tensor.py``), not by eager registration; kept on the declaration.

Beyond torchgen, a ``custom:`` section (torch_npu's, for ops ATen does not have) declares
vendor ops by schema, ``- func: toychip::scale_add(Tensor self, Tensor other, float alpha) -> Tensor``
(namespace ``toychip`` when none is given); :func:`register` defines each with
``torch.library`` and registers its kernel for PrivateUse1. Any other key is refused by name.
"""
from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
import yaml
from torch.utils._pytree import tree_flatten, tree_map

from .spec import NAME

YAML_PATH = Path(__file__).with_name("native_functions.yaml")
_BOOLEAN_KEYS = ("device_guard", "use_out_as_primary")
_LIST_KEYS = ("supported", "autograd", "symint", "full_codegen", "extra_headers", "custom")
_KEYS = {"backend", "cpp_namespace", "class_name", "non_native", "ir_gen", *_BOOLEAN_KEYS, *_LIST_KEYS}
_ENTRY_OPTIONS = {"structured"}

# The custom: sections' ops: the libraries that define them (one per namespace) and those that
# hold their kernels (one per op), kept alive so the ops stay registered.
_CUSTOM_LIBRARIES: dict[str, torch.library.Library] = {}
_CUSTOM_KERNELS: dict[str, torch.library.Library] = {}


class RegistrationError(RuntimeError):
    """The backend YAML is malformed or declares an op without a kernel."""


@dataclass(frozen=True)
class BackendDeclaration:
    """The parsed YAML: ``supported`` and ``autograd`` hold torchgen-style names (``add.Tensor``, ``relu``);
    ``custom`` holds vendor op schemas (``toychip::scale_add(Tensor self, ...) -> Tensor``)."""

    backend: str
    cpp_namespace: str
    supported: tuple[str, ...]
    autograd: tuple[str, ...]
    structured: tuple[str, ...] = ()
    symint: tuple[str, ...] = ()
    device_guard: bool = False
    use_out_as_primary: bool = False
    custom: tuple[str, ...] = ()
    codegen_only: tuple[tuple[str, Any], ...] = ()


def _entry(item, source: str) -> tuple[str, dict]:
    """A ``supported`` entry: a name, or a name with options (``{maximum.out: {structured: true}}``,
    or OpenReg's flat ``{maximum.out: null, structured: true}``)."""
    if isinstance(item, str):
        return item, {}
    names = [key for key in item if key not in _ENTRY_OPTIONS] if isinstance(item, dict) else []
    if len(names) != 1:
        raise RegistrationError(f"{source}: a supported entry is an op name, or one op name with options "
                                f"{sorted(_ENTRY_OPTIONS)}; got {item!r}")
    name = names[0]
    options = {**(item[name] or {}), **{key: item[key] for key in item if key != name}}
    unknown = set(options) - _ENTRY_OPTIONS
    if unknown or not all(isinstance(value, bool) for value in options.values()):
        raise RegistrationError(f"{source}: options of {name} must be among {sorted(_ENTRY_OPTIONS)}, "
                                f"true or false; got {options!r}")
    return name, options


def _custom_schema(item, source: str) -> str:
    if not (isinstance(item, dict) and set(item) == {"func"} and isinstance(item["func"], str)):
        raise RegistrationError(f"{source}: a custom entry is '- func: <schema>', got {item!r}")
    schema = item["func"]
    return schema if "::" in schema.split("(")[0] else f"{NAME}::{schema}"


def load_declaration(path: Path = YAML_PATH) -> BackendDeclaration:
    """Parse and validate the keys, as torchgen's ``parse_backend_yaml`` does."""
    source = Path(path).name
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, dict):
        raise RegistrationError(f"{source}: expected a mapping of keys, got {type(raw).__name__}")
    unknown = set(raw) - _KEYS
    if unknown:
        raise RegistrationError(f"{source}: unknown keys {sorted(unknown)}; expected some of {sorted(_KEYS)}")
    for key in _BOOLEAN_KEYS:
        if not isinstance(raw.get(key, False), bool):
            raise RegistrationError(f"{source}: {key} must be true or false, got {raw[key]!r}")
    for key in _LIST_KEYS:
        if not isinstance(raw.get(key) or [], list):
            raise RegistrationError(f"{source}: {key} must be a list, got {raw[key]!r}")
    entries = [_entry(item, source) for item in raw.get("supported") or ()]
    decl = BackendDeclaration(
        raw.get("backend"), raw.get("cpp_namespace"),
        supported=tuple(name for name, _ in entries), autograd=tuple(raw.get("autograd") or ()),
        structured=tuple(name for name, options in entries if options.get("structured")),
        symint=tuple(raw.get("symint") or ()), device_guard=raw.get("device_guard", False),
        use_out_as_primary=raw.get("use_out_as_primary", False),
        custom=tuple(_custom_schema(item, source) for item in raw.get("custom") or ()),
        codegen_only=tuple((key, raw[key]) for key in ("class_name", "extra_headers", "full_codegen",
                                                          "non_native", "ir_gen") if key in raw))
    if decl.backend != "PrivateUse1":
        raise RegistrationError(f"{source}: backend must be PrivateUse1, got {decl.backend!r}")
    repeated = [name for name, n in Counter(decl.supported + decl.autograd).items() if n > 1]
    if repeated:
        raise RegistrationError(f"{source}: ops declared twice: {', '.join(repeated)}")
    undeclared = [name for name in decl.symint if name not in decl.supported + decl.autograd]
    if undeclared:
        raise RegistrationError(f"{source}: symint names ops that are not declared: {', '.join(undeclared)}")
    return decl


def op_name(op: torch._ops.OpOverload) -> str:
    """The YAML's name of an ATen overload: ``add.Tensor``; the default overload is just ``relu``."""
    schema = op._schema
    name = schema.name.split("::")[1]
    return f"{name}.{schema.overload_name}" if schema.overload_name else name


def _aten_overload(name: str) -> torch._ops.OpOverload | None:
    packet_name, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, packet_name, None)
    if packet is None or (overload or "default") not in packet.overloads():
        return None
    return getattr(packet, overload or "default")


def _check_aten_op(name: str, source: str) -> None:
    if _aten_overload(name) is None:
        raise RegistrationError(f"{source} declares aten::{name}, which ATen does not have")


def _out_arguments(op: torch._ops.OpOverload) -> list:
    return [argument for argument in op._schema.arguments if argument.is_out]


def functional_of(out_name: str, source: str = YAML_PATH.name) -> str:
    """The functional overload a structured ``out=`` overload computes (``maximum.out`` -> ``maximum``):
    the overload of the same op whose arguments are the out overload's without ``out``."""
    out_op = _aten_overload(out_name)
    if out_op is None or not _out_arguments(out_op):
        raise RegistrationError(f"{source}: {out_name} is marked structured, but it is not an out= overload")
    inputs = [(a.name, str(a.type)) for a in out_op._schema.arguments if not a.is_out]
    packet = getattr(torch.ops.aten, out_name.partition(".")[0])
    for overload in packet.overloads():
        op = getattr(packet, overload)
        if not _out_arguments(op) and [(a.name, str(a.type)) for a in op._schema.arguments] == inputs:
            return op_name(op)
    raise RegistrationError(f"{source}: {out_name} is marked structured, but ATen has no functional overload for it")


def _structured_functional(out_name: str, out_kernel: Callable) -> Callable:
    """torchgen's structured wrapper, in Python: the meta function sizes the output, the out= kernel fills it."""
    functional = _aten_overload(functional_of(out_name))
    out_names = [argument.name for argument in _out_arguments(_aten_overload(out_name))]

    def kernel(*args, **kwargs):
        device = next(t.device for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor))
        on_meta = tree_map(lambda v: v.to("meta") if isinstance(v, torch.Tensor) else v, (args, kwargs))
        shapes = functional(*on_meta[0], **on_meta[1])
        outputs = [torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=device)
                   for m in tree_flatten(shapes)[0]]
        return out_kernel(*args, **kwargs, **dict(zip(out_names, outputs)))
    return kernel


def _chip_index(args: tuple, kwargs: dict) -> int | None:
    """The device index of the first chip tensor among the arguments (and in lists of them)."""
    for value in (*args, *kwargs.values()):
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, torch.Tensor) and item.device.type == NAME:
                return item.device.index
    return None


def _device_guarded(kernel: Callable) -> Callable:
    """torchgen's ``device_guard: true``: the current device is the first chip tensor's while the
    kernel runs, so its work is queued on (and charged to) that chip's current stream. Every op
    passes through this: the guard is entered only when the device must change."""
    @functools.wraps(kernel)
    def guarded(*args, **kwargs):
        index = _chip_index(args, kwargs)
        if index is None or index == torch.accelerator.current_device_index():
            return kernel(*args, **kwargs)
        with torch.accelerator.device_index(index):
            return kernel(*args, **kwargs)
    return guarded


def check(decl: BackendDeclaration, kernels: Mapping[str, Callable],
          autograd_kernels: Mapping[str, Callable], source: str = YAML_PATH.name,
          custom_kernels: Mapping[str, Callable] | None = None) -> None:
    """Every declared op must exist in ATen and have a kernel; the first missing one is named."""
    for names, table, where in ((decl.supported, kernels, "kernel in toychip/op_table.py"),
                                (decl.autograd, autograd_kernels, "AutogradPrivateUse1 kernel")):
        for name in names:
            _check_aten_op(name, source)
            if name not in table:
                raise RegistrationError(f"{source} declares aten::{name}, which has no {where}; "
                                        "add the kernel or remove the op from the YAML")
    for name in decl.structured:
        functional_of(name, source)
    for schema in decl.custom:
        qualified = schema.split("(")[0]
        if qualified not in (custom_kernels or {}):
            raise RegistrationError(f"{source} declares the custom op {qualified}, which has no kernel; "
                                    "pass it in custom_kernels")


def _kernels_to_register(decl: BackendDeclaration, kernels: Mapping[str, Callable]) -> dict[str, Callable]:
    table = {name: kernels[name] for name in decl.supported}
    for name in decl.structured:
        table.setdefault(functional_of(name), _structured_functional(name, kernels[name]))
    if decl.device_guard:
        table = {name: _device_guarded(kernel) for name, kernel in table.items()}
    return table


def register_custom(decl: BackendDeclaration, custom_kernels: Mapping[str, Callable]) -> list[str]:
    """Define each ``custom:`` op with torch.library (once per process) and register its PrivateUse1
    kernel; registering the op again replaces its kernel."""
    for schema in decl.custom:
        qualified = schema.split("(")[0]
        namespace, name = qualified.split("::")
        if not hasattr(getattr(torch.ops, namespace), name):
            definitions = _CUSTOM_LIBRARIES.setdefault(namespace, torch.library.Library(namespace, "FRAGMENT"))
            definitions.define(schema.split("::", 1)[1])
        if qualified in _CUSTOM_KERNELS:
            _CUSTOM_KERNELS.pop(qualified)._destroy()
        _CUSTOM_KERNELS[qualified] = torch.library.Library(namespace, "IMPL")
        _CUSTOM_KERNELS[qualified].impl(name, custom_kernels[qualified], "PrivateUse1")
    return [schema.split("(")[0] for schema in decl.custom]


def register(library: torch.library.Library, kernels: Mapping[str, Callable],
             autograd_kernels: Mapping[str, Callable] | None = None,
             path: Path = YAML_PATH, custom_kernels: Mapping[str, Callable] | None = None) -> BackendDeclaration:
    """Check the declaration against the kernels, then register exactly the declared ops
    (and the functional overloads of structured ones, and the custom: section's vendor ops)."""
    decl = load_declaration(path)
    autograd_kernels = autograd_kernels or {}
    check(decl, kernels, autograd_kernels, Path(path).name, custom_kernels)
    for name, kernel in _kernels_to_register(decl, kernels).items():
        library.impl(name, kernel, decl.backend)
    for name in decl.autograd:
        library.impl(name, autograd_kernels[name], "Autograd" + decl.backend)
    register_custom(decl, custom_kernels or {})
    return decl


def registered_ops(dispatch_key: str = "PrivateUse1") -> set[str]:
    """The ATen ops the dispatcher holds a kernel for under ``dispatch_key``, in the YAML's names."""
    return {name.removeprefix("aten::")
            for name in torch._C._dispatch_get_registrations_for_dispatch_key(dispatch_key)
            if name.startswith("aten::")}
