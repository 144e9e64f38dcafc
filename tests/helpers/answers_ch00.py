"""Chapter 00's catalogue: plausible wrong answers, each with the belief it embodies, and
correct answers written differently from the reference.

Tests paste this module into notebooks graded in the sandbox, where the solutions are
hidden; a wrong answer that is a reference with one mistake is a :mod:`mutants` mutant.
"""
import gc
import inspect
import statistics
import time
from collections import Counter

import torch
from torch.export import Dim
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import ShapeProp
from torch.utils._python_dispatch import TorchDispatchMode

import toychip
from mutants import mutant
from solutions.ch00_guide import benchmark


# --- 00.export_dynamic ----------------------------------------------------------------

def export_static(model, example):
    return torch.export.export(model, example)


def export_separate_dims(model, example):
    return torch.export.export(model, example, dynamic_shapes=tuple(
        {0: Dim(f"batch{i}")} for i in range(len(example))))


def export_with_trace(model, example):
    return torch.jit.trace(model, example)


def export_first_input_dynamic(model, example):
    return torch.export.export(model, example, dynamic_shapes=({0: Dim("batch")},) + (None,) * (len(example) - 1))


def export_with_auto_dims(model, example):
    return torch.export.export(model, example, dynamic_shapes=[{0: Dim.AUTO} for _ in example])


def export_with_bounded_batch(model, example):
    batch = Dim("batch", min=1, max=1024)
    return torch.export.export(model, example, dynamic_shapes=tuple({0: batch} for _ in example))


def export_with_shapes_collection(model, example):
    shapes, batch = torch.export.ShapesCollection(), Dim("batch")
    for tensor in example:
        shapes[tensor] = {0: batch}
    return torch.export.export(model, example, dynamic_shapes=shapes.dynamic_shapes(model, example))


def export_marked_dynamic(model, example):
    marked = tuple(t.clone() for t in example)
    for tensor in marked:
        torch._dynamo.mark_dynamic(tensor, 0)
    return torch.export.export(model, marked)


def export_by_parameter_name(model, example):
    names = list(inspect.signature(model.forward).parameters)
    return torch.export.export(model, example, dynamic_shapes={name: {0: Dim("batch")} for name in names})


# --- 00.benchmark ---------------------------------------------------------------------

def _timed_call(fn, args, synchronize) -> float:
    start = time.perf_counter()
    fn(*args)
    synchronize()
    return time.perf_counter() - start


def benchmark_without_warmup(fn, args, warmup, repeats, synchronize):
    samples = [_timed_call(fn, args, synchronize) for _ in range(repeats)]
    return {"median": statistics.median(samples), "samples": samples}


def benchmark_mean(fn, args, warmup, repeats, synchronize):
    for _ in range(warmup):
        fn(*args)
    synchronize()
    samples = [_timed_call(fn, args, synchronize) for _ in range(repeats)]
    return {"median": statistics.fmean(samples), "samples": samples}


def benchmark_fastest(fn, args, warmup, repeats, synchronize):
    for _ in range(warmup):
        fn(*args)
    synchronize()
    samples = [_timed_call(fn, args, synchronize) for _ in range(repeats)]
    return {"median": min(samples), "samples": samples}


benchmark_without_sync = mutant(benchmark, "benchmark_without_sync",
                                ("\n    synchronize()", ""),         # after the warm-up
                                ("\n        synchronize()", ""))     # after each call


def benchmark_unsynced_warmup(fn, args, warmup, repeats, synchronize):
    for _ in range(warmup):
        fn(*args)
    samples = [_timed_call(fn, args, synchronize) for _ in range(repeats)]
    return {"median": statistics.median(samples), "samples": samples}


benchmark_sync_before_start_only = mutant(benchmark, "benchmark_sync_before_start_only", (
    "start = time.perf_counter()\n        fn(*args)\n        synchronize()",
    "synchronize()\n        start = time.perf_counter()\n        fn(*args)"))


# the synchronize after the warm-up moved into each sample, after the clock starts
benchmark_clock_before_sync = mutant(
    benchmark, "benchmark_clock_before_sync", ("\n    synchronize()", ""),
    ("start = time.perf_counter()", "start = time.perf_counter()\n        synchronize()"))


benchmark_process_time = mutant(benchmark, "benchmark_process_time",
                                ("start = time.perf_counter()", "start = time.process_time()"),
                                ("time.perf_counter() - start", "time.process_time() - start"))


def benchmark_whole_loop(fn, args, warmup, repeats, synchronize):
    for _ in range(warmup):
        fn(*args)
    synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn(*args)
    synchronize()
    per_call = (time.perf_counter() - start) / repeats
    return {"median": per_call, "samples": [per_call] * repeats}


def benchmark_in_milliseconds(fn, args, warmup, repeats, synchronize):
    for _ in range(warmup):
        fn(*args)
    synchronize()
    samples = [_timed_call(fn, args, synchronize) * 1e3 for _ in range(repeats)]
    return {"median": statistics.median(samples), "samples": samples}


def benchmark_with_nanoseconds(fn, args, warmup, repeats, synchronize):
    for _ in range(warmup):
        fn(*args)
    samples = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter_ns()
        fn(*args)
        synchronize()
        samples.append((time.perf_counter_ns() - start) / 1e9)
    return {"samples": samples, "median": torch.tensor(samples, dtype=torch.float64).median().item()}


def benchmark_with_monotonic_clock(fn, args, warmup, repeats, synchronize):
    for _ in range(warmup):
        fn(*args)
    synchronize()

    def one_sample():
        began = time.monotonic()
        fn(*args)
        synchronize()
        return time.monotonic() - began
    samples = sorted(one_sample() for _ in range(repeats))
    return {"median": samples[len(samples) // 2], "samples": samples}


def benchmark_without_gc(fn, args, warmup, repeats, synchronize):
    calls = 0
    while calls < warmup:
        fn(*args)
        calls += 1
    collecting = gc.isenabled()
    gc.disable()
    try:
        samples = []
        while len(samples) < repeats:
            synchronize()
            began = time.perf_counter()
            fn(*args)
            synchronize()
            samples.append(time.perf_counter() - began)
    finally:
        if collecting:
            gc.enable()
    return {"samples": samples, "median": statistics.median_low(samples) if repeats % 2 else statistics.median(samples)}


# --- 00.kernel_costs -----------------------------------------------------------------

MATMULS = ("mm", "addmm", "bmm")


def _traced_nodes(fn, inputs, *, views: bool = False):
    gm = make_fx(fn)(*inputs)
    ShapeProp(gm).propagate(*inputs)
    return [n for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
            and (views or not n.target.is_view)]


def _tensor_inputs(node) -> list:
    return [n.meta["tensor_meta"] for n in node.all_input_nodes if "tensor_meta" in n.meta]


def _nbytes(meta) -> int:
    return meta.shape.numel() * meta.dtype.itemsize


def _flops(node) -> int:
    out, metas = node.meta["tensor_meta"], _tensor_inputs(node)
    if node.target._opname in MATMULS:
        return 2 * out.shape.numel() * metas[-2].shape[-1]
    return max(m.shape.numel() for m in [*metas, out])


def _kernel(node, nbytes: int, flops: int) -> dict:
    return {"op": node.target.__name__, "bytes": nbytes, "flops": flops}


def kernel_costs_with_views(fn, inputs):
    return [_kernel(n, sum(map(_nbytes, [*_tensor_inputs(n), n.meta["tensor_meta"]])), _flops(n))
            for n in _traced_nodes(fn, inputs, views=True)]


def kernel_costs_output_bytes_only(fn, inputs):
    return [_kernel(n, _nbytes(n.meta["tensor_meta"]), _flops(n)) for n in _traced_nodes(fn, inputs)]


def kernel_costs_multiply_add_is_one_flop(fn, inputs):
    kernels = []
    for n in _traced_nodes(fn, inputs):
        flops = _flops(n) // 2 if n.target._opname in MATMULS else _flops(n)
        kernels.append(_kernel(n, sum(map(_nbytes, [*_tensor_inputs(n), n.meta["tensor_meta"]])), flops))
    return kernels


def kernel_costs_broadcast_at_output_size(fn, inputs):
    kernels = []
    for n in _traced_nodes(fn, inputs):
        out, metas = n.meta["tensor_meta"], _tensor_inputs(n)
        if n.target._opname in MATMULS:
            nbytes = sum(map(_nbytes, [*metas, out]))
        else:
            nbytes = (len(metas) + 1) * _nbytes(out)
        kernels.append(_kernel(n, nbytes, _flops(n)))
    return kernels


def kernel_costs_inplace_counted_once(fn, inputs):
    kernels = []
    for n in _traced_nodes(fn, inputs):
        metas = _tensor_inputs(n)
        written = [] if n.target._opname.endswith("_") else [n.meta["tensor_meta"]]
        kernels.append(_kernel(n, sum(map(_nbytes, metas + written)), _flops(n)))
    return kernels


def kernel_costs_output_numel_flops(fn, inputs):
    kernels = []
    for n in _traced_nodes(fn, inputs):
        out = n.meta["tensor_meta"]
        flops = _flops(n) if n.target._opname in MATMULS else out.shape.numel()
        kernels.append(_kernel(n, sum(map(_nbytes, [*_tensor_inputs(n), out])), flops))
    return kernels


def kernel_costs_four_bytes_per_element(fn, inputs):
    return [_kernel(n, sum(4 * m.shape.numel() for m in [*_tensor_inputs(n), n.meta["tensor_meta"]]), _flops(n))
            for n in _traced_nodes(fn, inputs)]


def kernel_costs_bmm_without_batch(fn, inputs):
    kernels = []
    for n in _traced_nodes(fn, inputs):
        metas, out = _tensor_inputs(n), n.meta["tensor_meta"]
        if n.target._opname in MATMULS:
            (m, k), width = metas[-2].shape[-2:], metas[-1].shape[-1]
            flops = 2 * m * width * k
        else:
            flops = _flops(n)
        kernels.append(_kernel(n, sum(map(_nbytes, [*metas, out])), flops))
    return kernels


def kernel_costs_addmm_bias_flop(fn, inputs):
    kernels = []
    for n in _traced_nodes(fn, inputs):
        out = n.meta["tensor_meta"]
        flops = _flops(n) + (out.shape.numel() if n.target._opname == "addmm" else 0)
        kernels.append(_kernel(n, sum(map(_nbytes, [*_tensor_inputs(n), out])), flops))
    return kernels


def kernel_costs_from_fake_values(fn, inputs):
    gm = make_fx(fn)(*inputs)
    kernels = []
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or getattr(target, "is_view", True):
            continue
        tensors = [n.meta["val"] for n in node.all_input_nodes] + [node.meta["val"]]
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        if target.overloadpacket in (torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm):
            left = node.args[-2].meta["val"]
            flops = 2 * node.meta["val"].numel() * left.shape[-1]
        else:
            flops = max(t.numel() for t in tensors)
        kernels.append({"op": str(target).removeprefix("aten."), "bytes": nbytes, "flops": flops})
    return kernels


class _KernelRecorder(TorchDispatchMode):
    """Records every ATen call that is not a view, with its tensor arguments and results."""

    def __init__(self):
        super().__init__()
        self.kernels = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not func.is_view:
            tensors = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            outputs = [r for r in torch.utils._pytree.tree_leaves(result) if isinstance(r, torch.Tensor)]
            nbytes = sum(t.numel() * t.element_size() for t in tensors + outputs)
            if func._opname in ("mm", "addmm", "bmm"):
                flops = 2 * outputs[0].numel() * tensors[-2].shape[-1]
            else:
                flops = max(t.numel() for t in tensors + outputs)
            self.kernels.append({"op": func.__name__, "bytes": nbytes, "flops": flops})
        return result


def kernel_costs_by_dispatch_mode(fn, inputs):
    with torch.no_grad(), _KernelRecorder() as recorder:
        fn(*inputs)
    return list(reversed(recorder.kernels))


class _KernelMeter(torch.fx.Interpreter):
    """Runs a traced graph and measures the real tensors each kernel reads and writes."""

    def __init__(self, gm):
        super().__init__(gm)
        self.kernels = []

    def call_function(self, target, args, kwargs):
        reads = [a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]
        sizes = [(a.numel(), a.element_size(), tuple(a.shape)) for a in reads]
        result = super().call_function(target, args, kwargs)
        if not getattr(target, "is_view", False):
            nbytes = sum(n * s for n, s, _ in sizes) + result.numel() * result.element_size()
            if target in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default):
                flops = 2 * result.numel() * sizes[-2][2][-1]
            else:
                flops = max([n for n, _, _ in sizes] + [result.numel()])
            self.kernels.append({"op": target.__name__, "bytes": nbytes, "flops": flops})
        return result


def kernel_costs_by_interpreter(fn, inputs):
    meter = _KernelMeter(make_fx(fn)(*[t.clone() for t in inputs]))
    with torch.no_grad():
        meter.run(*[t.clone() for t in inputs])
    return meter.kernels


# --- 00.roofline ---------------------------------------------------------------------

def _kernel_times(kernel, spec) -> tuple[float, float]:
    return kernel["bytes"] / spec["mem_bytes_per_us"], kernel["flops"] / spec["flops_per_us"]


def roofline_of_totals(kernels, spec):
    move = sum(k["bytes"] for k in kernels) / spec["mem_bytes_per_us"]
    work = sum(k["flops"] for k in kernels) / spec["flops_per_us"]
    overhead = len(kernels) * spec["launch_us"]
    parts = {"overhead": overhead, "memory": move if move >= work else 0.0, "compute": work if work > move else 0.0}
    return {"time_us": overhead + max(move, work), "bound": max(parts, key=parts.get)}


def roofline_without_launches(kernels, spec):
    parts = {"overhead": 0.0, "memory": 0.0, "compute": 0.0}
    for k in kernels:
        move, work = _kernel_times(k, spec)
        parts["memory" if move >= work else "compute"] += max(move, work)
    return {"time_us": sum(parts.values()), "bound": max(parts, key=parts.get)}


def roofline_one_launch(kernels, spec):
    parts = {"overhead": spec["launch_us"], "memory": 0.0, "compute": 0.0}
    for k in kernels:
        move, work = _kernel_times(k, spec)
        parts["memory" if move >= work else "compute"] += max(move, work)
    return {"time_us": sum(parts.values()), "bound": max(parts, key=parts.get)}


def roofline_memory_plus_compute(kernels, spec):
    parts = {"overhead": len(kernels) * spec["launch_us"], "memory": 0.0, "compute": 0.0}
    for k in kernels:
        move, work = _kernel_times(k, spec)
        parts["memory"] += move
        parts["compute"] += work
    return {"time_us": sum(parts.values()), "bound": max(parts, key=parts.get)}


def roofline_bound_from_totals(kernels, spec):
    time_us = sum(spec["launch_us"] + max(_kernel_times(k, spec)) for k in kernels)
    parts = {"overhead": len(kernels) * spec["launch_us"],
             "memory": sum(k["bytes"] for k in kernels) / spec["mem_bytes_per_us"],
             "compute": sum(k["flops"] for k in kernels) / spec["flops_per_us"]}
    return {"time_us": time_us, "bound": max(parts, key=parts.get)}


def roofline_never_overhead_bound(kernels, spec):
    parts = {"memory": 0.0, "compute": 0.0}
    for k in kernels:
        move, work = _kernel_times(k, spec)
        parts["memory" if move >= work else "compute"] += max(move, work)
    return {"time_us": len(kernels) * spec["launch_us"] + sum(parts.values()), "bound": max(parts, key=parts.get)}


def roofline_majority_of_kernels(kernels, spec):
    votes = Counter()
    for k in kernels:
        move, work = _kernel_times(k, spec)
        terms = {"overhead": spec["launch_us"], "memory": move, "compute": work}
        votes[max(terms, key=terms.get)] += 1
    time_us = sum(spec["launch_us"] + max(_kernel_times(k, spec)) for k in kernels)
    return {"time_us": time_us, "bound": votes.most_common(1)[0][0]}


def roofline_whole_kernel_to_largest_term(kernels, spec):
    parts = {"overhead": 0.0, "memory": 0.0, "compute": 0.0}
    for k in kernels:
        move, work = _kernel_times(k, spec)
        terms = {"overhead": spec["launch_us"], "memory": move, "compute": work}
        parts[max(terms, key=terms.get)] += spec["launch_us"] + max(move, work)
    return {"time_us": sum(parts.values()), "bound": max(parts, key=parts.get)}


def roofline_with_chip_spec(kernels, spec):
    chip = toychip.ChipSpec(**spec)
    winners = [("memory" if move >= work else "compute", max(move, work))
               for move, work in (_kernel_times(k, spec) for k in kernels)]
    parts = {side: sum(t for s, t in winners if s == side) for side in ("memory", "compute")}
    parts["overhead"] = chip.launch_us * len(kernels)
    return {"bound": max(sorted(parts), key=parts.get),
            "time_us": sum(chip.kernel_us(k["bytes"], k["flops"]) for k in kernels)}


def roofline_by_intensity(kernels, spec):
    ridge = spec["flops_per_us"] / spec["mem_bytes_per_us"]      # flops per byte where the roofs meet
    memory = sum(k["bytes"] for k in kernels if k["flops"] <= ridge * k["bytes"]) / spec["mem_bytes_per_us"]
    compute = sum(k["flops"] for k in kernels if k["flops"] > ridge * k["bytes"]) / spec["flops_per_us"]
    overhead = len(kernels) * spec["launch_us"]
    parts = [(overhead, "overhead"), (memory, "memory"), (compute, "compute")]
    return {"time_us": overhead + memory + compute, "bound": max(parts, key=lambda p: p[0])[1]}


def roofline_vectorised(kernels, spec):
    nbytes = torch.tensor([k["bytes"] for k in kernels], dtype=torch.float64)
    flops = torch.tensor([k["flops"] for k in kernels], dtype=torch.float64)
    move, work = nbytes / spec["mem_bytes_per_us"], flops / spec["flops_per_us"]
    memory_wins = move >= work
    parts = sorted([(float(len(kernels) * spec["launch_us"]), "overhead"),
                    (float(move[memory_wins].sum()), "memory"), (float(work[~memory_wins].sum()), "compute")],
                   reverse=True)
    return {"time_us": sum(t for t, _ in parts), "bound": parts[0][1]}


WRONG_ANSWERS = [  # (exercise id, function, the misconception)
    ("00.export_dynamic", export_static,
     "export keeps batch sizes open unless told otherwise, so no dynamic_shapes is needed"),
    ("00.export_dynamic", export_separate_dims,
     "each input gets its own Dim, even when the model combines the inputs' batches"),
    ("00.export_dynamic", export_with_trace,
     "deployment means TorchScript (the seeds' advice): a trace is the exported program"),
    ("00.export_dynamic", export_first_input_dynamic,
     "only the first input carries the batch; the others may stay static"),
    ("00.export_dynamic", export_with_bounded_batch,
     "a dynamic dimension needs a range, and max=1024 is generous enough for any batch"),
    ("00.benchmark", benchmark_without_warmup,
     "the first calls are part of the cost, so warm-up calls need not be made"),
    ("00.benchmark", benchmark_mean,
     "the average is as good as the median for a per-call time"),
    ("00.benchmark", benchmark_fastest,
     "the fastest sample is the best estimate (as timeit suggests), so report the minimum"),
    ("00.benchmark", benchmark_without_sync,
     "a call returns when its work is done, so no synchronize is needed"),
    ("00.benchmark", benchmark_unsynced_warmup,
     "synchronising before stopping the clock is enough; the warm-up's queued work is not timed"),
    ("00.benchmark", benchmark_sync_before_start_only,
     "synchronising before starting the clock is enough; a call's own work is done when it returns"),
    ("00.benchmark", benchmark_clock_before_sync,
     "the synchronize that opens a sample may come after the clock starts"),
    ("00.benchmark", benchmark_process_time,
     "CPU time (time.process_time) is the better clock, since other processes do not disturb it"),
    ("00.benchmark", benchmark_whole_loop,
     "timing the whole loop once and dividing by repeats gives the same samples (the seeds' method)"),
    ("00.benchmark", benchmark_in_milliseconds,
     "benchmarks report milliseconds, as printed tables do"),
    ("00.kernel_costs", kernel_costs_with_views,
     "every ATen node launches a kernel, views (t, transpose, detach) included"),
    ("00.kernel_costs", kernel_costs_output_bytes_only,
     "a kernel's memory traffic is only what it writes"),
    ("00.kernel_costs", kernel_costs_multiply_add_is_one_flop,
     "a multiply-add is one flop, so a matmul costs M·N·K"),
    ("00.kernel_costs", kernel_costs_broadcast_at_output_size,
     "every operand of a pointwise or reduction kernel moves as many bytes as its output"),
    ("00.kernel_costs", kernel_costs_inplace_counted_once,
     "an in-place kernel writes into its input, so its output bytes are not counted again"),
    ("00.kernel_costs", kernel_costs_output_numel_flops,
     "a non-matmul kernel does one operation per output element (reductions included)"),
    ("00.kernel_costs", kernel_costs_four_bytes_per_element,
     "every element is 4 bytes (float32)"),
    ("00.kernel_costs", kernel_costs_bmm_without_batch,
     "a matmul costs 2·M·N·K whatever its batch, so bmm's batch dimension is left out"),
    ("00.kernel_costs", kernel_costs_addmm_bias_flop,
     "addmm's bias add is one more flop per output element on top of 2·M·N·K"),
    ("00.roofline", roofline_of_totals,
     "the roofline applies to the program: add all bytes and flops, then take one max"),
    ("00.roofline", roofline_without_launches,
     "the roofline is max(memory, compute); launching a kernel costs nothing"),
    ("00.roofline", roofline_one_launch,
     "launch_us is paid once per program, not once per kernel"),
    ("00.roofline", roofline_memory_plus_compute,
     "a kernel's memory time and compute time add up (they do not overlap)"),
    ("00.roofline", roofline_bound_from_totals,
     "the bound compares all bytes' time with all flops' time, whichever side each kernel is on"),
    ("00.roofline", roofline_never_overhead_bound,
     "the bound is memory or compute; launch overhead is a cost but never a bottleneck"),
    ("00.roofline", roofline_majority_of_kernels,
     "the program is bound where most of its kernels are (a vote of each kernel's largest term)"),
    ("00.roofline", roofline_whole_kernel_to_largest_term,
     "each kernel's whole time, launch included, goes to its largest term (launch, memory or compute)"),
]

RIGHT_ANSWERS = [  # (exercise id, function, how it differs from the reference)
    ("00.export_dynamic", export_with_auto_dims,
     "Dim.AUTO for every input, dynamic_shapes as a list"),
    ("00.export_dynamic", export_by_parameter_name,
     "dynamic_shapes keyed by forward's parameter names, a fresh Dim('batch') per input"),
    ("00.export_dynamic", export_with_shapes_collection,
     "torch.export.ShapesCollection keyed by the example tensors themselves"),
    ("00.export_dynamic", export_marked_dynamic,
     "torch._dynamo.mark_dynamic on copies of the examples, no dynamic_shapes"),
    ("00.benchmark", benchmark_with_nanoseconds,
     "perf_counter_ns, a synchronize before every sample, torch's median"),
    ("00.benchmark", benchmark_with_monotonic_clock,
     "time.monotonic, sorted samples, the middle one taken by index"),
    ("00.benchmark", benchmark_without_gc,
     "garbage collection off while sampling (as timeit does), while loops, median_low for odd counts"),
    ("00.kernel_costs", kernel_costs_from_fake_values,
     "meta['val'] (make_fx's fake tensors) instead of ShapeProp, names from str(target)"),
    ("00.kernel_costs", kernel_costs_by_dispatch_mode,
     "a TorchDispatchMode records the ATen calls while fn runs (no make_fx), reversed order"),
    ("00.kernel_costs", kernel_costs_by_interpreter,
     "an fx.Interpreter runs the traced graph and measures the real tensors of each call"),
    ("00.roofline", roofline_with_chip_spec,
     "time from toychip.ChipSpec(**spec).kernel_us, parts built from (side, time) pairs"),
    ("00.roofline", roofline_by_intensity,
     "kernels split at the ridge point by arithmetic intensity, bytes and flops summed per side"),
    ("00.roofline", roofline_vectorised,
     "float64 tensors and a boolean mask select each side's kernels, parts ranked by sorting"),
]
