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


def test_all_gather_single_concatenates_or_stacks_every_ranks_input(toyccl_ranks):
    want = [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]
    for r in toyccl_ranks:
        assert r["single"]["all_gather_single"].tolist() == want
        assert r["single"]["all_gather_stacked"].flatten().tolist() == want


def test_reduce_scatter_single_gives_each_rank_its_reduced_chunk(toyccl_ranks):
    # inputs 10 * rank + arange(6): chunk r of the sum is 10 + 2 * arange(3*r, 3*r+3)
    for rank, r in enumerate(toyccl_ranks):
        chunk = torch.arange(3.0 * rank, 3.0 * rank + 3)
        assert torch.equal(r["single"]["reduce_scatter_single"], 10 + 2 * chunk)
        assert torch.equal(r["single"]["reduce_scatter_avg"], 5 + chunk)
        assert torch.equal(r["single"]["reduce_scatter_max_int"], 10 + chunk.long())


def test_deprecated_2_12_names_still_work_and_warn(toyccl_ranks):
    for r in toyccl_ranks:
        assert torch.equal(r["single"]["all_gather_into_tensor"], r["single"]["all_gather_single"])
        assert torch.equal(r["single"]["reduce_scatter_tensor"], r["single"]["reduce_scatter_single"])
        assert [message.split("`")[1] for message in r["single"]["deprecations"]] == [
            "torch.distributed.all_gather_into_tensor", "torch.distributed.reduce_scatter_tensor"]


def test_reduce_sums_on_the_destination_only(toyccl_ranks):
    assert toyccl_ranks[1]["single"]["reduce"].tolist() == [10.0, 12.0, 14.0]
    assert toyccl_ranks[0]["single"]["reduce"].tolist() == [0.0, 1.0, 2.0]


def test_all_to_all_single_exchanges_even_and_uneven_blocks(toyccl_ranks):
    assert toyccl_ranks[0]["single"]["all_to_all_even"].tolist() == [0.0, 1.0, 10.0, 11.0]
    assert toyccl_ranks[1]["single"]["all_to_all_even"].tolist() == [2.0, 3.0, 12.0, 13.0]
    # rank 0 keeps its row 0 and gets rank 1's three rows; rank 1 gets rank 0's rows 1-2
    assert toyccl_ranks[0]["single"]["all_to_all_uneven"].tolist() == [[0.0, 1.0], [10.0, 11.0], [12.0, 13.0],
                                                                       [14.0, 15.0]]
    assert toyccl_ranks[1]["single"]["all_to_all_uneven"].tolist() == [[2.0, 3.0], [4.0, 5.0]]


def test_functional_collectives_run_eagerly_and_compiled(toyccl_ranks):
    gathered = [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0]
    for rank, r in enumerate(toyccl_ranks):
        f = r["functional"]
        assert f["all_gather_single"].tolist() == f["wait_tensor"].tolist() == gathered
        assert f["reduce_scatter_single"].tolist() == [10.0 + 4 * rank, 12.0 + 4 * rank]
        assert torch.equal(f["legacy"]["all_gather_tensor"], f["all_gather_single"])
        assert torch.equal(f["legacy"]["reduce_scatter_tensor"], f["reduce_scatter_single"])
        assert f["all_reduce"].tolist() == [5.0, 6.0, 7.0, 8.0]
        assert [t.tolist() for t in f["all_reduce_coalesced"]] == [[10.0, 12.0, 14.0, 16.0], [20.0, 24.0, 28.0, 32.0]]
        assert torch.equal(f["compiled_step"], f["eager_step"])


def test_compiled_ddp_splits_at_buckets_and_matches_eager_ddp(toyccl_ranks):
    for r in toyccl_ranks:
        assert r["compiled_ddp"]["graphs"] == 2
        for form in ("inner", "outer"):
            for compiled, eager in zip(r["compiled_ddp"][form], r["compiled_ddp"]["eager"]):
                assert (compiled - eager).abs().max() <= 1e-5 * eager.abs().max(), form


def test_fsdp2_trains_like_one_process_with_half_the_parameters_per_chip(toyccl_ranks):
    for rank, r in enumerate(toyccl_ranks):
        fsdp = r["fsdp"]
        assert fsdp["device"] == f"toychip:{rank}"
        assert fsdp["max_rel_error"] <= 1e-5
        assert fsdp["collectives"].keys() == {"all_gather_single", "reduce_scatter_single"}
        assert fsdp["local_shapes"]["0.weight"] == (128, 64)
        assert fsdp["sharded_bytes"] < 0.6 * fsdp["unsharded_bytes"]
