"""Operator registration driven by a backend YAML, the way torchgen registers a vendor's ops.

A vendor declares the ATen ops its chip implements in a backend YAML (``backend:``,
``cpp_namespace:``, ``supported:``, ``autograd:``; torch_npu's npu_native_functions.yaml,
torch_xla's xla_native_functions.yaml). torchgen reads it, fails when a declared op has no
kernel, and generates the ``TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)`` block that registers
exactly those ops. :func:`register` does the same in Python: the kernels come from the kernel
library (:func:`toychip.op_table.eager_kernels`), the declaration from ``native_functions.yaml``.
An ATen op the YAML does not declare reaches the boxed CPU fallback.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import torch
import yaml

YAML_PATH = Path(__file__).with_name("native_functions.yaml")
_KEYS = {"backend", "cpp_namespace", "supported", "autograd"}


class RegistrationError(RuntimeError):
    """The backend YAML is malformed or declares an op without a kernel."""


@dataclass(frozen=True)
class BackendDeclaration:
    """The parsed YAML: ``supported`` and ``autograd`` hold torchgen-style names (``add.Tensor``, ``relu``)."""

    backend: str
    cpp_namespace: str
    supported: tuple[str, ...]
    autograd: tuple[str, ...]


def load_declaration(path: Path = YAML_PATH) -> BackendDeclaration:
    """Parse and validate the keys, as torchgen's ``parse_backend_yaml`` does."""
    raw = yaml.safe_load(Path(path).read_text())
    unknown = set(raw) - _KEYS
    if unknown:
        raise RegistrationError(f"{Path(path).name}: unknown keys {sorted(unknown)}; expected {sorted(_KEYS)}")
    decl = BackendDeclaration(raw.get("backend"), raw.get("cpp_namespace"),
                              tuple(raw.get("supported") or ()), tuple(raw.get("autograd") or ()))
    if decl.backend != "PrivateUse1":
        raise RegistrationError(f"{Path(path).name}: backend must be PrivateUse1, got {decl.backend!r}")
    repeated = [name for name, n in Counter(decl.supported + decl.autograd).items() if n > 1]
    if repeated:
        raise RegistrationError(f"{Path(path).name}: ops declared twice: {', '.join(repeated)}")
    return decl


def op_name(op: torch._ops.OpOverload) -> str:
    """The YAML's name of an ATen overload: ``add.Tensor``; the default overload is just ``relu``."""
    schema = op._schema
    name = schema.name.split("::")[1]
    return f"{name}.{schema.overload_name}" if schema.overload_name else name


def _check_aten_op(name: str, source: str) -> None:
    packet_name, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, packet_name, None)
    if packet is None or (overload or "default") not in packet.overloads():
        raise RegistrationError(f"{source} declares aten::{name}, which ATen does not have")


def check(decl: BackendDeclaration, kernels: Mapping[str, Callable],
          autograd_kernels: Mapping[str, Callable], source: str = YAML_PATH.name) -> None:
    """Every declared op must exist in ATen and have a kernel; the first missing one is named."""
    for names, table, where in ((decl.supported, kernels, "kernel in toychip/op_table.py"),
                                (decl.autograd, autograd_kernels, "AutogradPrivateUse1 kernel")):
        for name in names:
            _check_aten_op(name, source)
            if name not in table:
                raise RegistrationError(f"{source} declares aten::{name}, which has no {where}; "
                                        "add the kernel or remove the op from the YAML")


def register(library: torch.library.Library, kernels: Mapping[str, Callable],
             autograd_kernels: Mapping[str, Callable] | None = None,
             path: Path = YAML_PATH) -> BackendDeclaration:
    """Check the declaration against the kernels, then register exactly the declared ops."""
    decl = load_declaration(path)
    autograd_kernels = autograd_kernels or {}
    check(decl, kernels, autograd_kernels, Path(path).name)
    for name in decl.supported:
        library.impl(name, kernels[name], decl.backend)
    for name in decl.autograd:
        library.impl(name, autograd_kernels[name], "Autograd" + decl.backend)
    return decl


def registered_ops(dispatch_key: str = "PrivateUse1") -> set[str]:
    """The ATen ops the dispatcher holds a kernel for under ``dispatch_key``, in the YAML's names."""
    return {name.removeprefix("aten::")
            for name in torch._C._dispatch_get_registrations_for_dispatch_key(dispatch_key)
            if name.startswith("aten::")}
