"""Mirrors OpenReg's test_distributed.py: the chip's collective backend in a two-rank group, with toyccl.

Upstream checks OpenReg's dummy OCCL backend, whose allreduce completes with the value None;
the chip's backend is toyccl (toychip.distributed), whose allreduce really sums, so the mirror
checks the sum. Both tests read the two-rank run that test_toyccl.py reads too (the
``toyccl_ranks`` fixture of tests/toychip/conftest.py).
"""
import torch


def test_occl_backend_registration_and_default_group(toyccl_ranks):
    for rank, result in enumerate(toyccl_ranks):
        group = result["default_group"]
        assert group["registered"] and group["initialized"]
        assert (result["backend"], group["group_backend"]) == ("toyccl", "toyccl")
        assert (group["world_size"], group["rank"]) == (2, rank)


def test_occl_allreduce(toyccl_ranks):
    for result in toyccl_ranks:
        group = result["default_group"]
        assert group["future_done"]
        assert torch.equal(group["allreduced"], torch.full((2,), 3.0))  # ranks 0 and 1 gave 1 and 2
        assert len(group["future_value"]) == 1 and torch.equal(group["future_value"][0], group["allreduced"])
