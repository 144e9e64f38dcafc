"""One torch thread for a timed block: on a small shared machine (the course's runs have 2
cores) a parallel kernel waits at its barrier for its slowest thread, so other processes'
load swings multi-threaded numbers."""
from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def one_torch_thread():
    """Run the block with one intra-op thread; the previous thread count comes back afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
