"""Two ranks on the toy chip with toyccl, next to gloo on the CPU (run once for test_toyccl.py
and openreg/test_distributed.py, by the ``toyccl_ranks`` fixture of conftest.py).

:func:`run` (or ``python toyccl_worker.py OUT_DIR``) spawns world size 2 over a FileStore in
OUT_DIR; each rank saves what the test checks to OUT_DIR/rank{r}.pt.
"""
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.distributed_c10d import _get_default_group
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD_SIZE = 2


def _collectives(rank: int) -> dict:
    def chip_full(shape, value):
        return torch.full(shape, float(value), device="toychip")

    summed, averaged = chip_full((3,), rank + 1), chip_full((3,), rank + 1)
    dist.all_reduce(summed)
    dist.all_reduce(averaged, op=dist.ReduceOp.AVG)
    broadcast = chip_full((2,), rank)
    dist.broadcast(broadcast, src=1)
    gathered = [torch.empty(2, device="toychip") for _ in range(WORLD_SIZE)]
    dist.all_gather(gathered, chip_full((2,), rank))
    dist.barrier()
    return {"sum": summed.cpu(), "avg": averaged.cpu(), "broadcast": broadcast.cpu(),
            "all_gather": [g.cpu() for g in gathered], "device": str(summed.device),
            "backend": dist.get_backend(), "toychip_default": dist.Backend.default_device_backend_map["toychip"]}


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


def worker(rank: int, out_dir: str) -> None:
    import toychip  # noqa: F401  (registers the chip and toyccl)

    store = dist.FileStore(str(Path(out_dir) / "store"), WORLD_SIZE)
    # A Python ProcessGroup replaces the whole group (torch 2.13), so "cpu:gloo,toychip:toyccl"
    # would send CPU tensors to toyccl too: the gloo reference gets a group of its own.
    dist.init_process_group("toyccl", store=store, rank=rank, world_size=WORLD_SIZE)
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    cpu_model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    chip_model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    chip_model.load_state_dict(cpu_model.state_dict())
    result = {**_collectives(rank), "default_group": _default_group(rank), "gloo_cpu": _ddp_step(cpu_model, "cpu", rank, gloo),
              "toyccl_chip": _ddp_step(chip_model, "toychip", rank, dist.group.WORLD)}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")
    dist.destroy_process_group()


def run(out_dir) -> None:
    mp.spawn(worker, args=(str(out_dir),), nprocs=WORLD_SIZE)


if __name__ == "__main__":
    run(sys.argv[1])
