"""Does the OpInfo sweep sort ops into native, fallback and failing in each variant (forward,
non-contiguous, out=, gradient), as the chip's coverage says?"""
import numpy as np
import pytest
import torch

import toychip
from toychip import opinfo


@pytest.fixture(scope="module")
def verdicts():
    """relu has a chip kernel, cumsum has none; exp gets a planted wrong kernel (off by one),
    neg one that is wrong on non-contiguous inputs only, relu's backward one that doubles."""
    with toychip.kernel_scope():
        toychip.register_kernel("aten::exp", lambda a: np.exp(a) + 1)
        toychip.register_kernel("aten::neg", lambda a: -a if a.flags.c_contiguous else a)
        toychip.register_kernel("aten::threshold_backward", lambda g, x, t: np.where(x > t, 2 * g, 0))
        result = opinfo.sweep(["nn.functional.relu", "cumsum", "exp", "neg"], max_samples=2)
    return result, {(row.name, row.variant): row for row in result.rows}


def test_op_with_a_chip_kernel_is_native(verdicts):
    _, rows = verdicts
    relu = rows["nn.functional.relu", "forward"]
    assert (relu.status, relu.fallback_ops) == ("native", ())


def test_op_without_a_kernel_is_fallback_and_names_the_aten_op(verdicts):
    _, rows = verdicts
    assert (rows["cumsum", "forward"].status, rows["cumsum", "forward"].fallback_ops) == ("fallback", ("cumsum.out",))


def test_wrong_kernel_is_failing_with_the_reason_and_the_greatest_difference(verdicts):
    _, rows = verdicts
    assert rows["exp", "forward"].status == "failing"
    assert rows["exp", "forward"].reason.startswith("AssertionError: Tensor-likes are not close! "
                                                    "(greatest absolute difference: 1.0")


def test_kernel_wrong_on_strided_inputs_fails_only_the_noncontiguous_variant(verdicts):
    _, rows = verdicts
    assert (rows["neg", "forward"].status, rows["neg", "noncontiguous"].status) == ("native", "failing")


def test_wrong_backward_kernel_fails_only_the_gradient_variant(verdicts):
    _, rows = verdicts
    assert [rows["nn.functional.relu", v].status for v in ("forward", "noncontiguous", "grad")] == \
        ["native", "native", "failing"]


def test_out_variant_runs_for_ops_that_support_out_and_names_the_out_overload(verdicts):
    _, rows = verdicts
    assert (rows["cumsum", "out"].status, rows["cumsum", "out"].fallback_ops) == ("fallback", ("cumsum.out",))
    assert ("nn.functional.relu", "out") not in rows     # relu has no out= variant in its OpInfo


def test_markdown_has_totals_per_variant_and_a_column_per_variant(verdicts):
    result, _ = verdicts
    assert result.totals("forward") == {"native": 2, "fallback": 1, "failing": 1}
    assert result.totals("grad")["failing"] == 2         # relu and exp (whose forward is wrong)
    text = result.markdown()
    assert "| OpInfo | forward | non-contiguous | out= | gradient | CPU fallback ops / reason |" in text
    assert "| cumsum | fallback 2 | fallback 2 | fallback 2 | fallback 2 | cumsum.out" in text
    assert "| forward | 2 | 1 | 1 | 4 |" in text
    assert text.splitlines()[-1] == "skipped, not comparable with the CPU: 0"


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="unknown sweep variants"):
        opinfo.sweep(["add"], variants=("backward",))


def test_ops_pytorch_does_not_compare_with_the_cpu_are_skipped():
    result = opinfo.sweep(["rand_like"], max_samples=1)
    assert (result.rows, result.skipped) == ([], ["rand_like"])


def test_cpu_reference_of_a_view_keeps_its_storage_offset():
    """as_strided reads the storage: a CPU copy of the view alone moved offset 0 to the view's start."""
    base = torch.arange(10.0, device="toychip")
    view = base[5:]
    copy = opinfo.cpu_reference(view)
    assert (copy.storage_offset(), copy.untyped_storage().nbytes()) == (5, 40)
    assert torch.as_strided(copy, (2,), (1,), 0).tolist() == [0.0, 1.0]


def test_as_strided_partial_views_and_as_strided_scatter_match_the_cpu():
    result = opinfo.sweep(["as_strided", "as_strided_scatter"], max_samples=3, variants=("forward",))
    assert {row.name: row.status for row in result.rows} == {
        "as_strided": "native", "as_strided.partial_views": "native", "as_strided_scatter": "native"}


def test_as_strided_scatter_of_a_0d_source():
    """The sample that failed with "cannot reshape array of size 0 into shape ()"."""
    into = torch.zeros(1, device="toychip")
    out = torch.as_strided_scatter(into, torch.tensor(3.0, device="toychip"), (), ())
    assert out.cpu().tolist() == [3.0]
