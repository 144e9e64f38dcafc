"""Shared tiny models and a training loop run in each mode (cpu / eager / lazy / compiled)."""
import contextlib
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import toychip


def make_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def make_cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(3 * 4 * 4, 4))


MODELS = {"mlp": (make_mlp, (6, 8)), "cnn": (make_cnn, (6, 1, 8, 8))}


def train(model_name: str, mode: str, steps: int = 3, compile_optimizer: bool = False):
    """Train a seeded tiny model; returns (losses, parameters on the CPU)."""
    make, shape = MODELS[model_name]
    torch.manual_seed(0)
    model = make()
    x, y = torch.randn(shape), torch.randint(0, 4, (shape[0],))
    if mode != "cpu":
        model, x, y = model.to("toychip"), x.to("toychip"), y.to("toychip")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def loss_fn(inputs, targets):
        return F.cross_entropy(model(inputs), targets)

    def opt_step():
        opt.step()

    if mode == "compiled":
        torch._dynamo.reset()
        loss_fn = torch.compile(loss_fn, backend="toychip")
        if compile_optimizer:
            opt_step = torch.compile(opt_step, backend="toychip")
    context = toychip.lazy if mode == "lazy" else contextlib.nullcontext
    losses = []
    for _ in range(steps):
        with context():
            opt.zero_grad()
            loss = loss_fn(x, y)
            loss.backward()
            opt_step()
            toychip.mark_step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


@pytest.fixture
def chip_pair():
    """A CPU tensor and its toychip copy."""
    torch.manual_seed(3)
    cpu = torch.randn(4, 5)
    return cpu, cpu.to("toychip")


@pytest.fixture
def run_training():
    """``run_training(model_name, mode, steps=3, compile_optimizer=False)``."""
    return train


@pytest.fixture(scope="session")
def toyccl_ranks(tmp_path_factory):
    """Both ranks' results from one two-process toyccl run (spawn, FileStore, world size 2),
    shared by test_toyccl.py and openreg/test_distributed.py: spawning imports torch twice.

    The worker module goes on sys.path so the spawned ranks can import it by name.
    """
    out = tmp_path_factory.mktemp("toyccl")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(Path(__file__).parent))
        import toyccl_worker

        toyccl_worker.run(out)
    return [torch.load(out / f"rank{r}.pt") for r in range(2)]
