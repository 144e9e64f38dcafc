"""Plausible wrong answers to chapter 00's exercises; the checks must reject each one."""
import statistics
import time

import torch


def choose_seed_advice(scenario):
    """Seed 000's guide: TorchScript for every deployment, torch.compile for every speed-up."""
    if scenario["hardware"] == "tpu":
        return "torch_xla"
    if scenario["hardware"] == "new_chip":
        return "PrivateUse1+custom backend"
    return {"debug": "eager", "rewrite_graph": "torch.fx", "deploy": "TorchScript"}.get(scenario["goal"], "torch.compile")


def choose_always_compile(scenario):
    """Modern deployment paths, but compiles every speed-up, however tiny or short the job."""
    if scenario["hardware"] == "tpu":
        return "torch_xla"
    if scenario["hardware"] == "new_chip":
        return "PrivateUse1+custom backend"
    if scenario["goal"] == "deploy":
        return {"cpp_server": "torch.export+AOTInductor", "mobile": "ExecuTorch",
                "onnx_runtime": "ONNX"}[scenario["deploy_to"]]
    return {"debug": "eager", "rewrite_graph": "torch.fx"}.get(scenario["goal"], "torch.compile")


def benchmark_without_warmup(fn, args, warmup, repeats, synchronize):
    """Times from the very first call: the cold calls land in the samples."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        synchronize()
        samples.append(time.perf_counter() - start)
    return {"median": statistics.median(samples), "samples": samples}


def benchmark_mean(fn, args, warmup, repeats, synchronize):
    """Warms up and synchronises, but reports the mean: one pause drags it up."""
    for _ in range(warmup):
        fn(*args)
    synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        synchronize()
        samples.append(time.perf_counter() - start)
    return {"median": statistics.fmean(samples), "samples": samples}


def benchmark_without_sync(fn, args, warmup, repeats, synchronize):
    """Never waits for the device: on an asynchronous device it times only the enqueue."""
    for _ in range(warmup):
        fn(*args)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return {"median": statistics.median(samples), "samples": samples}


def bottleneck_by_time(profile):
    """Judges by the total time alone: short means overhead, long means compute."""
    if profile["time_us"] < 100:
        return "overhead"
    return "memory" if profile["time_us"] < 1000 else "compute"


def bottleneck_roofline_only(profile):
    """The classic roofline test (arithmetic intensity vs ridge point) forgets launch overhead."""
    ridge = profile["flops_per_us"] / profile["mem_bytes_per_us"]
    return "compute" if profile["flops"] / profile["bytes"] >= ridge else "memory"


def export_static(model, example):
    """Exports with the example's shapes baked in: other batch sizes fail the guard."""
    return torch.export.export(model, example)


def export_separate_dims(model, example):
    """One Dim per input: export refuses when the inputs' batches must be equal."""
    return torch.export.export(model, example, dynamic_shapes=tuple(
        {0: torch.export.Dim(f"batch{i}")} for i in range(len(example))))


def export_with_trace(model, example):
    """The seed's deployment path: a TorchScript trace is not an ExportedProgram."""
    return torch.jit.trace(model, example)


WRONG_ANSWERS = [
    ("00.choose_technology", choose_seed_advice),
    ("00.choose_technology", choose_always_compile),
    ("00.benchmark", benchmark_without_warmup),
    ("00.benchmark", benchmark_mean),
    ("00.benchmark", benchmark_without_sync),
    ("00.bottleneck", bottleneck_by_time),
    ("00.bottleneck", bottleneck_roofline_only),
    ("00.export_dynamic", export_static),
    ("00.export_dynamic", export_separate_dims),
    ("00.export_dynamic", export_with_trace),
]
