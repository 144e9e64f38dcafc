"""``toyccl``: the chip's collective backend, a Python ``ProcessGroup`` registered for "toychip".

A vendor plugs its collective library into ``torch.distributed`` as a backend: NCCL for
CUDA, HCCL (Ascend), CNCL (Cambricon), MCCL (Moore Threads). Each registers a name and the
devices it serves (``Backend.register_backend(name, creator, devices=[...])``); after that
``init_process_group("toyccl")`` -- or a plain ``init_process_group()`` on a machine with
the chip -- routes collectives on chip tensors to it, and ``DistributedDataParallel``
works on chip parameters unchanged. A backend written in Python is a whole
``ProcessGroup``, and torch 2.13 lets it replace the group even in a mixed
``"cpu:gloo,toychip:toyccl"``: toyccl then serves CPU tensors too (a C++ backend registers
per device instead). Give gloo a group of its own (``dist.new_group(backend="gloo")``)
for CPU-only collectives.

Honest limits: a real collective library moves data chip-to-chip over the device
interconnect (NVLink, HCCS) with kernels that reduce on the device. ``toyccl`` has no
interconnect: it copies the chip tensors to the host, runs gloo's collective on those
CPU copies (over the same store), and copies the results back -- the host copies are
charged on the simulated clock, the network time is not. Work objects complete before
they are returned (collectives are synchronous).
"""
from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

BACKEND = "toyccl"


def _done(result) -> dist._Work:
    """A finished work object: collectives here complete before they return."""
    future = torch.futures.Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _host(tensors):
    return [t.cpu() for t in tensors]


def _copy_back(targets, sources) -> None:
    for target, source in zip(targets, sources):
        target.copy_(source)


class ToycclProcessGroup(dist.ProcessGroup):
    """allreduce (sum, avg, product, min, max), broadcast, allgather, barrier on chip tensors.

    The transport is a gloo group over a prefixed view of the same store.
    """

    def __init__(self, store: dist.Store, rank: int, world_size: int, timeout: timedelta):
        super().__init__(rank, world_size)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore(BACKEND, store), rank, world_size, timeout)

    def getBackendName(self) -> str:
        return BACKEND

    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        average = op == dist.ReduceOp.AVG  # gloo has no AVG: sum, then divide
        host = _host(tensors)
        self._gloo.allreduce(host, dist.ReduceOp.SUM if average else op).wait()
        if average:
            host = [h / self.size() if h.is_floating_point() else h // self.size() for h in host]
        _copy_back(tensors, host)
        return _done(tensors)

    def broadcast(self, tensors, opts=None):
        host = _host(tensors)
        options = dist.BroadcastOptions()
        options.rootRank = opts.rootRank if opts is not None else 0
        options.rootTensor = opts.rootTensor if opts is not None else 0
        self._gloo.broadcast(host, options).wait()
        _copy_back(tensors, host)
        return _done(tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        host_out = [_host(outputs) for outputs in output_tensors]
        self._gloo.allgather(host_out, _host(input_tensors)).wait()
        for targets, sources in zip(output_tensors, host_out):
            _copy_back(targets, sources)
        return _done(output_tensors)

    def _allgather_base(self, output, input, opts=None):
        chunks = list(output.chunk(self.size()))
        self.allgather([chunks], [input])
        return _done(output)

    def barrier(self, opts=None):
        self._gloo.barrier().wait()
        return _done(None)


def _create(store, rank, world_size, timeout) -> ToycclProcessGroup:
    return ToycclProcessGroup(store, rank, world_size, timeout)


def register() -> None:
    """Register ``toyccl`` as the default collective backend of "toychip" tensors (idempotent)."""
    if dist.is_available() and BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=["toychip"])
