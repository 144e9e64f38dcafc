"""toychip: a simulated accelerator plugged into PyTorch 2.13 where real vendors plug in.

``import toychip`` registers the chip at every level. Its modules, bottom-up -- the order
a vendor integrates and data flows; each imports only modules above it in this list
(``tests/test_import_layers.py`` checks it)::

    runtime_build  compiles csrc/ (the chip's C++ runtime) into an extension module, cached
    runtime   loads it: device guard, hooks, allocators, generators for PrivateUse1; its Python face
    untraced  Dynamo never traces the chip's Python (its kernels are the dispatcher's, not user code)
    spec      the "toychip" device name, ChipSpec (the data sheet), the spec plugged in, index checks, index_of
    ledger    per-(chip, stream) timelines: the open profiles' and the chips' own clock; charge_kernel/copy/malloc; the host's waits
    races     the race report (CUDA sanitizer's vector clocks): unsynchronised cross-stream accesses, sanitizer()
    dtypes    stored dtypes; float16/bfloat16 stored in 16 bits, computed in float32
    allocator the caching allocator: blocks per stream and size class, record_stream, merging, empty_cache
    memory    the kernels' NumPy view of a storage's memory, results adopted as memory, aliasing views
    ipc       chip tensors through torch.multiprocessing: storages moved into shared memory, rebuilt over the same pages
    streams   torch.Stream / Event of the runtime's guard: per-stream timelines on the simulated clock
    device    the device module PyTorch calls (torch.toychip): registration, RNG, memory stats
    trace     a profile's simulated timeline as a Chrome trace (export_chrome_trace)
    clock     deterministic simulated time: toychip.profile(), Profile adds up the ledger's charges
    kineto    the chip in torch.profiler: the runtime's Kineto activity profiler gets the clock's ops
    kernels   the kernel library (the vendor SDK), NumPy
    registration  native_functions.yaml declares the ops (torchgen's keys, a custom: section); checked and registered as torchgen does
    op_table  ATen op -> kernel, registered for PrivateUse1 (the dispatcher)
    fallback  boxed CPU fallback, toychip.coverage(), toychip.strict(), use_fallback()
    custom_kernels  register_kernel(op, numpy_fn) inside a kernel_scope()
    autocast  torch.autocast("toychip"): AutocastPrivateUse1 kernels for CUDA's autocast lists
    distributed  "toyccl": the chip's collective backend (over gloo): DDP, FSDP2, functional collectives
    dispatch_trace  trace_dispatch(fn, ...): the keys one call visits, kernels run
    fusion    scheduler: pointwise trees and matmul epilogues -> one kernel
    decompositions  ops without a kernel that graph modes build from chip kernels (gelu)
    codegen   readable Python for each scheduled graph
    lazy_ir   the pending graph as plain IRNode records, its structural hash
    lazy_tensor  with toychip.lazy(): record IR, fuse, cache, run on demand
    dynamo_interface  the chip's torch._dynamo DeviceInterface (registered with the compiler)
    compiler  torch.compile(backend="toychip"): AOTAutograd + partitioner + codegen
    loops     what the chip's Inductor kernels call: chip memory as flat NumPy, one charged launch
    inductor_codegen  Inductor's fused loops printed as NumPy (NumpyKernel, NumpyScheduling)
    inductor  the chip registered with Inductor: torch.compile(model) with the default backend
    stack     the same backend as replaceable pieces (chapter 08's capstone): Pieces, compile_island
    views     GraphView data for the course's visualisers
    opinfo    the OpInfo sweep: op_db samples on the chip vs the CPU, forward, non-contiguous, out=, gradient (needs expecttest)

Example::

    x = torch.randn(4, device="toychip")
    with toychip.profile() as p:
        y = torch.relu(x * 2)
    print(p.table())
"""
import importlib
import warnings

from . import autocast, device, distributed, fallback, ipc, kineto, memory, op_table, untraced
from .clock import Profile, profile
from .custom_kernels import chip_kernel, kernel_scope, register_kernel
from .dispatch_trace import DispatchTrace, trace_dispatch
from .fallback import (Coverage, FallbackError, coverage, cpu_fallback, reset_coverage, set_fallback, strict,
                       use_fallback)
from .fusion import FusionError
from .lazy_ir import IRNode
from .lazy_tensor import dump_ir, graph_hash, lazy, lazy_metrics, mark_step, pending_graph, reset_lazy_metrics
from .memory import DeviceMismatchError
from .op_table import ops_table
from .races import RaceError, RaceWarning, sanitizer
from .spec import DEFAULT_SPEC, ChipSpec

# `python -m toychip.runtime_build` imports this package (and so builds the runtime) before it
# runs that module again as __main__; runpy's warning about it is noise (see runtime_build.main).
warnings.filterwarnings("ignore", message="'toychip.runtime_build' found in sys.modules", category=RuntimeWarning)

device.register()
device.set_inductor_classes(lambda: importlib.import_module(".inductor", __name__).register())
memory.register()
ipc.register()
op_table.register()
fallback.register()
autocast.register()
distributed.register()
kineto.register()
untraced.skip_package(__name__)

_FROM_COMPILER = ("get_generated_code", "print_generated_code")


def __getattr__(name: str):
    """The compile backend's helpers, loaded (with Dynamo) only when first used."""
    if name in _FROM_COMPILER:
        from . import compiler

        return getattr(compiler, name)
    raise AttributeError(f"module 'toychip' has no attribute {name!r}")


__all__ = [
    "ChipSpec", "DEFAULT_SPEC", "Profile", "profile", "Coverage", "coverage", "reset_coverage", "strict",
    "FallbackError", "DeviceMismatchError", "lazy", "mark_step", "lazy_metrics", "reset_lazy_metrics",
    "dump_ir", "graph_hash", "pending_graph", "IRNode", "FusionError", "ops_table", "register_kernel",
    "chip_kernel", "kernel_scope", "trace_dispatch", "DispatchTrace", "cpu_fallback", "set_fallback",
    "use_fallback", "sanitizer", "RaceError", "RaceWarning", *_FROM_COMPILER,
]


def _autoload() -> None:
    """The ``torch.backends`` entry point: ``import torch`` calls it when a package declares it.

    torch 2.13's ``_import_device_backends`` loads every entry point of the group and calls
    it (``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns this off). A package declares it with::

        [project.entry-points."torch.backends"]
        toychip = "toychip:_autoload"

    The course does not: every ``import torch`` in its environment would load the chip.
    Importing this package already registered the chip, so there is nothing left to do;
    like torch_npu's ``_autoload``, it exists so the entry point names a function.
    """
