"""A one-line description of where a number was measured."""
from __future__ import annotations

import os
import platform
from functools import lru_cache

import torch


@lru_cache(maxsize=None)
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_hardware(device: str = "cpu") -> str:
    """E.g. ``CPU: AMD EPYC 7B13 (2 cores, 2 torch threads), torch 2.13.0``."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        name = torch.cuda.get_device_name(torch.device(device))
        return f"GPU: {name}, torch {torch.__version__}"
    return (f"CPU: {_cpu_model()} ({os.cpu_count()} cores, "
            f"{torch.get_num_threads()} torch threads), torch {torch.__version__}")
