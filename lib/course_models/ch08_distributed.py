"""Chapter 08 §6.1's two-rank run: FSDP2 (``fully_shard``) on two chips next to the same
training in one process, over toyccl, measured on the simulated clock.

:func:`run_fsdp` spawns the ranks (``toychip:0`` and ``toychip:1``, a FileStore in a
temporary directory) and returns what each measured; :func:`fsdp_rank` is one rank's part,
on a process group already initialized (tests/toychip/toyccl_worker.py runs it too).
"""
from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import toychip

WORLD_SIZE = 2
SIZES = (64, 256, 16)   # in, hidden, out: about 81 KiB of float32 parameters


def mlp() -> nn.Sequential:
    """The same two-layer MLP on every call (seeded)."""
    torch.manual_seed(0)
    features, hidden, out = SIZES
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, out))


def batches(device, steps: int = 3, batch: int = 8) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Fixed inputs and targets, already on ``device`` (so a profile of training copies nothing for them)."""
    generator = torch.Generator().manual_seed(1)
    features, _, out = SIZES
    return [(torch.randn(batch, features, generator=generator).to(device),
             torch.randn(batch, out, generator=generator).to(device)) for _ in range(steps)]


def train(model: nn.Module, data, rank: int = 0, world_size: int = 1) -> None:
    """SGD on mean-squared error; rank r of ``world_size`` takes the r-th slice of every batch,
    so averaging the ranks' gradients (what FSDP2's reduce-scatter does) gives the whole batch's."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in data:
        nn.functional.mse_loss(model(x.chunk(world_size)[rank]), y.chunk(world_size)[rank]).backward()
        optimizer.step()
        optimizer.zero_grad()


def _measured(profile: toychip.Profile) -> dict:
    copy_us = sum(stat.time_us for name, stat in profile.kernels.items() if name.startswith("copy:"))
    return {"time_us": profile.time_us, "launches": profile.launches, "copies": profile.copies,
            "copy_us": copy_us, "peak_bytes": profile.peak_bytes,
            "calls": {name: stat.calls for name, stat in profile.kernels.items()}}


def fsdp_rank(rank: int, world_size: int = WORLD_SIZE) -> dict:
    """Train :func:`mlp` alone on this rank's chip (the reference), then sharded by FSDP2 over the
    default group. Returns the parameters' bytes on the chip, each training's profile, the
    collectives toyccl served and the ops that fell back to the CPU in FSDP2's training, and the
    largest relative error of the FSDP2 parameters against the reference."""
    device = torch.device("toychip", rank)
    torch.toychip.set_device(device)
    data = batches(device)
    reference = mlp().to(device)
    with toychip.profile() as alone:
        train(reference, data)

    before = torch.toychip.memory_allocated(device)
    model = mlp().to(device)
    unsharded = torch.toychip.memory_allocated(device) - before
    mesh = init_device_mesh("toychip", (world_size,))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    sharded = torch.toychip.memory_allocated(device) - before

    group = dist.group.WORLD
    served_before = Counter(group.calls)
    toychip.reset_coverage()
    with toychip.profile() as sharded_training:
        train(model, data, rank, world_size)
    served = group.calls - served_before
    fallback = sorted(toychip.coverage().fallback)
    errors = [(p.full_tensor() - r).abs().max() / r.abs().max()
              for p, r in zip(model.parameters(), reference.parameters())]
    return {"device": str(device), "unsharded_bytes": unsharded, "sharded_bytes": sharded,
            "local_shapes": {name: tuple(p.to_local().shape) for name, p in model.named_parameters()},
            "alone": _measured(alone), "fsdp": _measured(sharded_training), "collectives": dict(served),
            "fallback": fallback, "max_rel_error": max(errors).item()}


def _worker(rank: int, out_dir: str) -> None:
    store = dist.FileStore(str(Path(out_dir) / "store"), WORLD_SIZE)
    dist.init_process_group("toyccl", store=store, rank=rank, world_size=WORLD_SIZE)
    torch.save(fsdp_rank(rank), Path(out_dir) / f"rank{rank}.pt")
    dist.destroy_process_group()


def run_fsdp() -> list[dict]:
    """:func:`fsdp_rank` on two processes, one chip each; each rank's results, rank 0 first."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(out_dir,), nprocs=WORLD_SIZE)
        return [torch.load(Path(out_dir) / f"rank{rank}.pt") for rank in range(WORLD_SIZE)]
