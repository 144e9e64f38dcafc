"""Does toyccl, the chip's Python ProcessGroup, run collectives and DDP on chip tensors?"""
import torch


def test_toyccl_is_the_chips_default_backend(toyccl_ranks):
    assert [(r["backend"], r["toychip_default"]) for r in toyccl_ranks] == [("toyccl", "toyccl")] * 2
    assert toyccl_ranks[0]["device"] == "toychip:0"


def test_all_reduce_sums_and_averages_across_ranks(toyccl_ranks):
    for r in toyccl_ranks:
        assert torch.equal(r["sum"], torch.full((3,), 3.0))
        assert torch.equal(r["avg"], torch.full((3,), 1.5))


def test_broadcast_and_all_gather_deliver_every_rank_the_same(toyccl_ranks):
    for r in toyccl_ranks:
        assert torch.equal(r["broadcast"], torch.ones(2))
        assert [g.tolist() for g in r["all_gather"]] == [[0.0, 0.0], [1.0, 1.0]]


def test_ddp_step_on_chip_equals_gloo_on_cpu(toyccl_ranks):
    for r in toyccl_ranks:
        for name, (grad, weight) in r["gloo_cpu"].items():
            chip_grad, chip_weight = r["toyccl_chip"][name]
            for got, want in ((chip_grad, grad), (chip_weight, weight)):
                assert (got - want).abs().max() <= 1e-5 * want.abs().max(), name
    assert all(torch.equal(a, b) for a, b in zip(toyccl_ranks[0]["toyccl_chip"]["0.weight"],
                                                  toyccl_ranks[1]["toyccl_chip"]["0.weight"]))
