"""toychip: a simulated accelerator plugged into PyTorch 2.13 where real vendors plug in.

``import toychip`` registers the chip at every level, in the order a vendor integrates
(and the order data flows)::

    spec      ChipSpec: the data sheet the simulated clock charges with
    memory    device memory = NumPy buffers on the tensor's storage, aliasing views
    device    the "toychip" device name, device module (torch.toychip), RNG
    clock     deterministic simulated time: toychip.profile()
    kernels   the kernel library (the vendor SDK), NumPy
    op_table  ATen op -> kernel, registered for PrivateUse1 (the dispatcher)
    fallback  boxed CPU fallback, toychip.coverage(), toychip.strict()
    fusion    scheduler: pointwise trees and matmul epilogues -> one kernel
    codegen   readable Python for each scheduled graph
    lazy_tensor  with toychip.lazy(): record IR, fuse, cache, run on demand
    compiler  torch.compile(backend="toychip"): AOTAutograd + partitioner + codegen
    views     GraphView data for the course's visualisers

Example::

    x = torch.randn(4, device="toychip")
    with toychip.profile() as p:
        y = torch.relu(x * 2)
    print(p.table())
"""
from . import compiler, device, fallback, op_table
from .clock import Profile, profile
from .compiler import get_generated_code, print_generated_code
from .fallback import Coverage, FallbackError, coverage, reset_coverage, strict
from .lazy_tensor import dump_ir, lazy, lazy_metrics, mark_step, reset_lazy_metrics
from .memory import DeviceMismatchError
from .op_table import ops_table
from .spec import DEFAULT_SPEC, ChipSpec

device.register()
op_table.register()
fallback.register()
compiler.register()

__all__ = [
    "ChipSpec", "DEFAULT_SPEC", "Profile", "profile", "Coverage", "coverage", "reset_coverage",
    "strict", "FallbackError", "DeviceMismatchError", "lazy", "mark_step", "lazy_metrics",
    "reset_lazy_metrics", "dump_ir", "get_generated_code", "print_generated_code", "ops_table",
]
