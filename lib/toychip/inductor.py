"""The chip registered with Inductor, as vendors do: ``torch.compile(model)`` with no backend.

Inductor keeps, per device type, a *scheduling* class (prints the fused kernels) and a
*wrapper codegen* class (prints the Python that allocates buffers and calls the kernels,
``call(args)``), plus *device op overrides* (the wrapper's lines for "set device", "get the
raw stream"). ``register_backend_for_device`` and ``register_device_op_overrides``
(``torch/_inductor/codegen/common.py``) fill those tables. OpenReg registers its device with
``CppScheduling`` (``torch_openreg/torch_openreg/inductor_backend.py`` in pytorch/pytorch's
``test/cpp_extensions/open_registration_extension``); torch_npu registers Triton scheduling
subclasses (``torch_npu/_inductor/__init__.py``). The chip registers

* :class:`~toychip.inductor_codegen.NumpyScheduling` -- NumPy kernels for fused loops;
* :class:`ToychipWrapperCodegen` -- Python's wrapper, calling those kernels as functions;
* :class:`ToychipDeviceOpOverrides` -- the chip's device module in the wrapper's lines;

and its Dynamo device interface (:mod:`toychip.dynamo_interface`). The first time Inductor
compiles in a process (for any device, ``init_backend_registration``), it asks a PrivateUse1
device module for ``Scheduling``, ``PythonWrapperCodegen``, ``CppWrapperCodegen`` and
``WrapperFxCodegen`` and registers them -- if one is missing, it registers nothing, silently.
``torch.toychip`` answers from :data:`DEVICE_MODULE_CLASSES`, after :func:`register` on the
first question (:func:`toychip.device.__getattr__`), so ``import toychip`` does not import Inductor.
"""
from __future__ import annotations

import functools
from textwrap import dedent

import sympy
import torch
from torch._inductor.codegen.common import (DeviceOpOverrides, register_backend_for_device,
                                            register_device_op_overrides)
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen, pexpr
from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files
from torch._inductor.runtime.hints import DeviceProperties
from torch._inductor.virtualized import V

from . import dynamo_interface, inductor_codegen, loops
from .inductor_codegen import NumpyScheduling
from .spec import NAME, get_spec, on_spec_change


class ToychipDeviceOpOverrides(DeviceOpOverrides):
    """The wrapper's device lines: the chip computes synchronously on its current stream."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return dedent(f"""
            def {name}(index):
                return 0
            """)

    def set_device(self, device_idx: int) -> str:
        return f"torch.{NAME}.set_device({device_idx})"

    def synchronize(self) -> str:
        return f"torch.{NAME}.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.{NAME}.device({device_idx})"


class ToychipWrapperCodegen(PythonWrapperCodegen):
    """Inductor's Python wrapper; the chip's kernels are Python functions it calls directly."""

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return ToychipWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.splice("""
            import numpy as np
            from toychip import dtypes, loops
            from toychip.loops import sdk
            """, strip=True)

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        """A buffer on the graph's chip: Inductor's line names the device type only, since it
        enters a device guard for GPU types alone (``device_need_guard``); name the index."""
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == NAME and device.index:
            return line.replace(f"device='{NAME}'", f"device='{device}'")
        return line

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if device.type == NAME and not triton:  # sizes arrive as sympy: print them as Python
            args = [pexpr(arg) if isinstance(arg, sympy.Expr) else str(arg) for arg in call_args]
            self.writeline(self.wrap_kernel_call(kernel_name, args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


def refused_wrapper(name: str, why: str) -> type:
    """A wrapper codegen class Inductor may be asked for (a compile option) that the chip
    cannot be: creating it raises ``why``."""
    def create(*args, **kwargs):
        raise NotImplementedError(f"toychip: {why}")

    # supports_caching is asked before create(): whether to look in the cache of compiled graphs.
    return type(name, (), {"__doc__": why, "supports_caching": False, "create": staticmethod(create)})


NoCppWrapperCodegen = refused_wrapper(
    "NoCppWrapperCodegen", "Inductor's cpp_wrapper and AOTInductor need C++ kernels; the chip's are NumPy "
    "(compile without cpp_wrapper)")
NoFxWrapperCodegen = refused_wrapper(
    "NoFxWrapperCodegen", "Inductor's FX wrapper (fx_wrapper) converts Triton kernels only; the chip's are NumPy "
    "(compile without fx_wrapper)")


class CodegenVersion(CustomGraphModulePass):
    """A graph pass that changes nothing: its ``uuid`` is part of the key of Inductor's cache
    of compiled graphs, which would otherwise serve kernels that older sources of the chip's
    code generator printed, or that it printed for a chip with other compute units."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        pass

    def uuid(self) -> bytes:
        sources = (inductor_codegen.__file__, loops.__file__, __file__)
        return get_hash_for_files(sources, extra=f"compute_units={get_spec().compute_units}")


# What Inductor asks the device module for (init_backend_registration), by name.
DEVICE_MODULE_CLASSES = {"Scheduling": NumpyScheduling, "PythonWrapperCodegen": ToychipWrapperCodegen,
                         "CppWrapperCodegen": NoCppWrapperCodegen, "WrapperFxCodegen": NoFxWrapperCodegen}


@functools.cache
def register() -> dict:
    """Fill Inductor's tables for the chip and give Dynamo its device interface, once; the
    classes by the names the device module serves them under (asked once per name)."""
    register_backend_for_device(NAME, NumpyScheduling, ToychipWrapperCodegen, NoCppWrapperCodegen,
                                NoFxWrapperCodegen, device_custom_pass=CodegenVersion())
    register_device_op_overrides(NAME, ToychipDeviceOpOverrides())
    dynamo_interface.register()
    on_spec_change(DeviceProperties.create.cache_clear)  # it caches compute_units as the SM count
    return DEVICE_MODULE_CLASSES
