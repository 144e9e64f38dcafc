"""Two ranks on the toy chip with toyccl, next to gloo on the CPU (run once for test_toyccl.py
and openreg/test_distributed.py, by the ``toyccl_ranks`` fixture of conftest.py).

:func:`run` (or ``python toyccl_worker.py OUT_DIR``) spawns world size 2 over a FileStore in
OUT_DIR; rank r works on ``toychip:r`` and saves what the tests check to OUT_DIR/rank{r}.pt.
One pair of processes serves every check: starting one imports torch and the chip.
"""
import sys
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.distributed_c10d import _get_default_group
from torch.nn.parallel import DistributedDataParallel as DDP

from course_models import ch08_distributed

WORLD_SIZE = 2


def _chip_full(shape, value, dtype=torch.float32):
    return torch.full(shape, value, dtype=dtype, device="toychip")


def _collectives(rank: int) -> dict:
    summed, averaged = _chip_full((3,), rank + 1.0), _chip_full((3,), rank + 1.0)
    dist.all_reduce(summed)
    dist.all_reduce(averaged, op=dist.ReduceOp.AVG)
    broadcast = _chip_full((2,), float(rank))
    dist.broadcast(broadcast, src=1)
    gathered = [torch.empty(2, device="toychip") for _ in range(WORLD_SIZE)]
    dist.all_gather(gathered, _chip_full((2,), float(rank)))
    dist.barrier()
    return {"sum": summed.cpu(), "avg": averaged.cpu(), "broadcast": broadcast.cpu(),
            "all_gather": [g.cpu() for g in gathered], "device": str(summed.device),
            "backend": dist.get_backend(), "toychip_default": dist.Backend.default_device_backend_map["toychip"]}


def _single_tensor_collectives(rank: int) -> dict:
    """torch 2.13's single-tensor collectives on odd sizes: each rank's input is ``10 * rank + arange``."""
    def ranked(n, dtype=torch.float32):
        return (torch.arange(n, dtype=dtype) + 10 * rank).to("toychip")

    gathered, stacked = torch.empty(6, device="toychip"), torch.empty(2, 3, device="toychip")
    dist.all_gather_single(gathered, ranked(3))
    dist.all_gather_single(stacked, ranked(3))
    scattered, averaged = torch.empty(3, device="toychip"), torch.empty(3, device="toychip")
    dist.reduce_scatter_single(scattered, ranked(6))
    dist.reduce_scatter_single(averaged, ranked(6).view(2, 3), op=dist.ReduceOp.AVG)
    integers = torch.empty(3, dtype=torch.int64, device="toychip")
    dist.reduce_scatter_single(integers, ranked(6, torch.int64), op=dist.ReduceOp.MAX)
    reduced = ranked(3)
    dist.reduce(reduced, dst=1)
    even = torch.empty(4, device="toychip")
    dist.all_to_all_single(even, ranked(4))
    # uneven: rank 0 sends 1 row to itself and 2 to rank 1; rank 1 sends 3 rows to rank 0 and none to itself
    sent, received = ([1, 2], [1, 3]) if rank == 0 else ([3, 0], [2, 0])
    uneven = torch.empty(sum(received), 2, device="toychip")
    dist.all_to_all_single(uneven, ranked(2 * sum(sent)).view(-1, 2), received, sent)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        legacy_gathered, legacy_scattered = torch.empty(6, device="toychip"), torch.empty(3, device="toychip")
        dist.all_gather_into_tensor(legacy_gathered, ranked(3))
        dist.reduce_scatter_tensor(legacy_scattered, ranked(6))
    return {"all_gather_single": gathered.cpu(), "all_gather_stacked": stacked.cpu(),
            "reduce_scatter_single": scattered.cpu(), "reduce_scatter_avg": averaged.cpu(),
            "reduce_scatter_max_int": integers.cpu(), "reduce": reduced.cpu(), "all_to_all_even": even.cpu(),
            "all_to_all_uneven": uneven.cpu(), "all_gather_into_tensor": legacy_gathered.cpu(),
            "reduce_scatter_tensor": legacy_scattered.cpu(),
            "deprecations": sorted({str(w.message) for w in caught if w.category is FutureWarning})}


def _functional_collectives(rank: int) -> dict:
    """torch.distributed._functional_collectives on chip tensors, eagerly and compiled (2.13 names;
    all_gather_tensor and reduce_scatter_tensor are their deprecated spellings)."""
    group = dist.group.WORLD
    x = (torch.arange(4.0) + 10 * rank).to("toychip")

    def step(t):
        gathered = funcol.all_gather_single(t, 0, group)
        averaged = funcol.reduce_scatter_single(gathered, "avg", 0, group)
        return funcol.all_reduce(gathered * 2, "sum", group) + averaged.sum()

    raw = torch.ops._c10d_functional.all_gather_into_tensor(x, WORLD_SIZE, group.group_name)
    coalesced = funcol.all_reduce_coalesced([x, 2 * x], "sum", group)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        legacy = {"all_gather_tensor": funcol.all_gather_tensor(x, 0, group).cpu(),
                  "reduce_scatter_tensor": funcol.reduce_scatter_tensor(x, "sum", 0, group).cpu()}
    return {"all_gather_single": funcol.all_gather_single(x, 0, group).cpu(),
            "reduce_scatter_single": funcol.reduce_scatter_single(x, "sum", 0, group).cpu(),
            "all_reduce": funcol.all_reduce(x, "avg", group).cpu(),
            "all_reduce_coalesced": [t.cpu() for t in coalesced], "legacy": legacy,
            "wait_tensor": torch.ops._c10d_functional.wait_tensor(raw).cpu(),
            "eager_step": step(x).cpu(), "compiled_step": torch.compile(step, backend="toychip")(x).cpu()}


def _default_group(rank: int) -> dict:
    """The default group as OpenReg's test_distributed sees it, and its allreduce's future."""
    group = _get_default_group()
    tensor = torch.full((2,), float(rank + 1), device="toychip")
    future = group.allreduce([tensor]).get_future()
    future.wait()
    return {"registered": "toyccl" in dist.Backend.backend_list, "initialized": dist.is_initialized(),
            "group_backend": dist.get_backend(group), "world_size": dist.get_world_size(),
            "rank": dist.get_rank(), "future_done": future.done(),
            "future_value": [t.cpu() for t in future.value()], "allreduced": tensor.cpu()}


def _ddp_step(model: nn.Module, device: str, rank: int, group) -> dict:
    """One SGD step of DDP on this rank's own batch; gradients and updated weights."""
    ddp = DDP(model.to(device), process_group=group)
    generator = torch.Generator().manual_seed(rank)
    x, y = torch.randn(5, 4, generator=generator), torch.randn(5, 2, generator=generator)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    nn.functional.mse_loss(ddp(x.to(device)), y.to(device)).backward()
    optimizer.step()
    return {name: (p.grad.cpu(), p.detach().cpu()) for name, p in model.named_parameters()}


def _compiled_ddp(rank: int) -> dict:
    """Two SGD steps of a DDP model: eager, with its module compiled (backend="toychip"), and the
    whole DDP compiled. Each layer is over 1 MiB, DDP's bucket cap, so the DDPOptimizer splits the
    compiled module into one graph per bucket. torch.compile(DDP(model)) breaks the graph in DDP's
    forward (a logger call) and, in torch 2.13, compiles nothing (pytorch/pytorch#140416); it still
    trains, eagerly."""
    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512)).to("toychip")

    def train(module):
        optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
        generator = torch.Generator().manual_seed(rank)
        x, y = torch.randn(4, 512, generator=generator), torch.randn(4, 512, generator=generator)
        for _ in range(2):
            nn.functional.mse_loss(module(x.to("toychip")), y.to("toychip")).backward()
            optimizer.step()
            optimizer.zero_grad()

    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return torch._dynamo.lookup_backend("toychip")(gm, example_inputs)

    eager, inner, outer = model(), model(), model()
    train(DDP(eager, bucket_cap_mb=1))
    train(DDP(torch.compile(inner, backend=counting_backend), bucket_cap_mb=1))
    train(torch.compile(DDP(outer, bucket_cap_mb=1), backend="toychip"))
    return {"graphs": len(graphs), **{name: [p.detach().cpu() for p in m.parameters()]
                                      for name, m in (("eager", eager), ("inner", inner), ("outer", outer))}}


def worker(rank: int, out_dir: str) -> None:
    import toychip  # noqa: F401  (registers the chip and toyccl)

    torch.toychip.set_device(rank)
    store = dist.FileStore(str(Path(out_dir) / "store"), WORLD_SIZE)
    # A Python ProcessGroup replaces the whole group (torch 2.13), so "cpu:gloo,toychip:toyccl"
    # would send CPU tensors to toyccl too: the gloo reference gets a group of its own.
    dist.init_process_group("toyccl", store=store, rank=rank, world_size=WORLD_SIZE)
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    cpu_model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    chip_model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    chip_model.load_state_dict(cpu_model.state_dict())
    import time; t0 = time.time(); TIMES = {}
    result = {**_collectives(rank), "default_group": _default_group(rank),
              "gloo_cpu": _ddp_step(cpu_model, "cpu", rank, gloo),
              "toyccl_chip": _ddp_step(chip_model, "toychip", rank, dist.group.WORLD),
              "single": _single_tensor_collectives(rank), "functional": _functional_collectives(rank),
              "compiled_ddp": _compiled_ddp(rank), "fsdp": ch08_distributed.fsdp_rank(rank, WORLD_SIZE)}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")
    dist.destroy_process_group()


def run(out_dir) -> None:
    mp.spawn(worker, args=(str(out_dir),), nprocs=WORLD_SIZE)


if __name__ == "__main__":
    run(sys.argv[1])
