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

What it serves, under torch 2.13's names: ``all_reduce``, ``broadcast``, ``reduce``,
``all_gather``, ``all_gather_single`` (``all_gather_into_tensor`` is its deprecated alias),
``reduce_scatter``, ``reduce_scatter_single`` (``reduce_scatter_tensor`` likewise),
``all_to_all_single`` (even or uneven splits), ``barrier``, and the coalesced forms the
functional collectives call (FSDP2 calls ``all_gather_single`` and ``reduce_scatter_single``).
Python reaches them by method name; C++ callers (DDP's reducer, ``torch.ops._c10d_functional.*``,
so ``torch.distributed._functional_collectives`` and compiled code) reach them through the methods ``PyProcessGroup`` (the pybind trampoline,
``torch/csrc/distributed/c10d/PyProcessGroup.hpp``) forwards to Python: ``allreduce``,
``allreduce_coalesced``, ``broadcast``, ``allgather``, ``all_gather_single_coalesced``,
``reduce_scatter``, ``reduce_scatter_single_coalesced``, ``all_to_all_single``, ``barrier``.
The group also keeps its own name: a C++ ``ProcessGroup`` keeps it in its per-device
backends, which a Python group has none of, and the functional collectives find a group by name.

Honest limits: a real collective library moves data chip-to-chip over the device
interconnect (NVLink, HCCS) with kernels that reduce on the device, on a stream of its
own. ``toyccl`` has no interconnect: it copies the chip tensors to the host on the current
stream, runs gloo's collective on those CPU copies (over the same store), and copies the
results back -- the host copies are charged on the simulated clock, the network time is
not. Work objects complete before they are returned (collectives are synchronous).
``ReduceOp.AVG`` and ``PREMUL_SUM`` are a sum scaled afterwards (gloo has neither).
"""
from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

BACKEND = "toyccl"
_RedOp = dist.ReduceOp.RedOpType
_GLOO_OPS = (_RedOp.SUM, _RedOp.PRODUCT, _RedOp.MIN, _RedOp.MAX, _RedOp.BAND, _RedOp.BOR, _RedOp.BXOR)


def _done(result) -> dist._Work:
    """A finished work object: collectives here complete before they return."""
    future = torch.futures.Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _host(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [t.cpu() for t in tensors]


def _copy_back(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    for target, source in zip(targets, sources):
        target.copy_(source)


def _collective(method):
    """Count each call in ``group.calls`` (by method name): what torch asked the backend for."""
    @functools.wraps(method)
    def counted(self, *args, **kwargs):
        self.calls[method.__name__] += 1
        return method(self, *args, **kwargs)

    return counted


def _reduce_op(opts) -> dist.ReduceOp:
    return opts.reduceOp if opts is not None else dist.ReduceOp(_RedOp.SUM)


def _flat_host(tensor: torch.Tensor) -> torch.Tensor:
    """A 1-D host copy: the single-tensor collectives accept concatenated or stacked shapes."""
    return tensor.cpu().reshape(-1)


def _flat_host_like(tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty(tensor.numel(), dtype=tensor.dtype)


class ToycclProcessGroup(dist.ProcessGroup):
    """The collectives of ``torch.distributed`` on chip tensors, each a gloo collective on host copies.

    The transport is a gloo group over a prefixed view of the same store; ``calls`` counts
    the collectives served, by method name.
    """

    def __init__(self, store: dist.Store, rank: int, world_size: int, timeout: timedelta):
        super().__init__(rank, world_size)
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore(BACKEND, store), rank, world_size, timeout)
        self._group_name = ""
        self.calls: Counter[str] = Counter()

    def getBackendName(self) -> str:
        return BACKEND

    def getGroupName(self) -> str:
        return self._group_name

    def setGroupName(self, name: str) -> None:
        self._group_name = name

    def _reducing(self, op, host_outputs: Sequence[torch.Tensor],
                  collective: Callable[[dist.ReduceOp.RedOpType], dist.Work]) -> None:
        """Run gloo's reducing ``collective`` with ``op``. gloo has no AVG or PREMUL_SUM: both run
        as a SUM whose host outputs are then scaled (by 1/world size, by the factor)."""
        kind = op.op if isinstance(op, dist.ReduceOp) else op
        if kind in _GLOO_OPS:
            collective(kind).wait()
            return
        if kind not in (_RedOp.AVG, _RedOp.PREMUL_SUM):
            raise ValueError(f"toyccl does not serve {kind}: use SUM, AVG, PREMUL_SUM, PRODUCT, MIN, MAX "
                             "or a bitwise op")
        collective(_RedOp.SUM).wait()
        for t in host_outputs:
            if kind == _RedOp.PREMUL_SUM:
                t.mul_(op.factor)
            elif t.is_floating_point():
                t.div_(self.size())
            else:
                t.floor_divide_(self.size())

    @_collective
    def allreduce(self, tensors, opts=None):
        host = _host(tensors)
        self._reducing(_reduce_op(opts), host, lambda op: self._gloo.allreduce(host, op))
        _copy_back(tensors, host)
        return _done(tensors)

    @_collective
    def allreduce_coalesced(self, tensors, opts=None):
        host = _host(tensors)

        def gloo_allreduce_coalesced(op):
            options = dist.AllreduceCoalescedOptions()
            options.reduceOp = op
            return self._gloo.allreduce_coalesced(host, options)

        self._reducing(_reduce_op(opts), host, gloo_allreduce_coalesced)
        _copy_back(tensors, host)
        return _done(tensors)

    @_collective
    def reduce(self, tensors, opts=None):
        host = _host(tensors)

        def gloo_reduce(op):
            options = dist.ReduceOptions()
            options.reduceOp, options.rootRank, options.rootTensor = op, opts.rootRank, opts.rootTensor
            return self._gloo.reduce(host, options)

        self._reducing(_reduce_op(opts), host, gloo_reduce)
        if self.rank() == opts.rootRank:
            _copy_back(tensors, host)
        return _done(tensors)

    @_collective
    def broadcast(self, tensors, opts=None):
        host = _host(tensors)
        options = dist.BroadcastOptions()
        options.rootRank = opts.rootRank if opts is not None else 0
        options.rootTensor = opts.rootTensor if opts is not None else 0
        self._gloo.broadcast(host, options).wait()
        _copy_back(tensors, host)
        return _done(tensors)

    @_collective
    def allgather(self, output_tensors, input_tensors, opts=None):
        host_out = [_host(outputs) for outputs in output_tensors]
        self._gloo.allgather(host_out, _host(input_tensors)).wait()
        for targets, sources in zip(output_tensors, host_out):
            _copy_back(targets, sources)
        return _done(output_tensors)

    def _gather_into(self, output: torch.Tensor, input: torch.Tensor) -> None:
        """``output`` gets every rank's ``input`` one after another (concatenated or stacked)."""
        host_out = _flat_host_like(output)
        self._gloo._allgather_base(host_out, _flat_host(input)).wait()
        output.copy_(host_out.view(output.shape))

    @_collective
    def all_gather_single(self, output, input, opts=None):
        self._gather_into(output, input)
        return _done([output])

    @_collective
    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        for output, input in zip(outputs, inputs):
            self._gather_into(output, input)
        return _done(outputs)

    def _reduce_scattering(self, opts, host_outputs: Sequence[torch.Tensor],
                           gloo_call: Callable[[dist.ReduceScatterOptions], dist.Work]) -> None:
        """``gloo_call(options)`` with the op of ``opts`` (see :meth:`_reducing`)."""
        def with_op(op):
            options = dist.ReduceScatterOptions()
            options.reduceOp = op
            return gloo_call(options)

        self._reducing(_reduce_op(opts), host_outputs, with_op)

    @_collective
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        host_out = [torch.empty_like(t, device="cpu") for t in output_tensors]
        host_in = [_host(inputs) for inputs in input_tensors]
        self._reduce_scattering(opts, host_out, lambda options: self._gloo.reduce_scatter(host_out, host_in, options))
        _copy_back(output_tensors, host_out)
        return _done(output_tensors)

    def _reduce_scatter_into(self, output: torch.Tensor, input: torch.Tensor, opts) -> None:
        """``input`` is every rank's ``output``-sized chunk one after another (concatenated or
        stacked); this rank's chunk, reduced over the ranks, lands in ``output``."""
        host_out, host_in = _flat_host_like(output), _flat_host(input)
        self._reduce_scattering(opts, [host_out],
                                lambda options: self._gloo._reduce_scatter_base(host_out, host_in, options))
        output.copy_(host_out.view(output.shape))

    @_collective
    def reduce_scatter_single(self, output, input, opts=None):
        self._reduce_scatter_into(output, input, opts)
        return _done([output])

    @_collective
    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        for output, input in zip(outputs, inputs):
            self._reduce_scatter_into(output, input, opts)
        return _done(outputs)

    @_collective
    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        """Block j of ``input`` (along dim 0) goes to rank j; block i of ``output`` comes from rank i.
        Without split sizes the blocks are even; with them they may differ, even be empty."""
        host_out = torch.empty_like(output, device="cpu")
        self._gloo.alltoall_base(host_out, input.cpu(), output_split_sizes, input_split_sizes,
                                 dist.AllToAllOptions()).wait()
        output.copy_(host_out)
        return _done([output])

    @_collective
    def barrier(self, opts=None):
        self._gloo.barrier().wait()
        return _done(None)

    # torch.distributed's older, private spellings of the same collectives
    _allgather_base = all_gather_single
    _reduce_scatter_base = reduce_scatter_single


def _create(store, rank, world_size, timeout) -> ToycclProcessGroup:
    return ToycclProcessGroup(store, rank, world_size, timeout)


def register() -> None:
    """Register ``toyccl`` as the default collective backend of "toychip" tensors (idempotent)."""
    if dist.is_available() and BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=["toychip"])
