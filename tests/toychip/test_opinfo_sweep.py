"""Does the OpInfo sweep sort ops into native, fallback and failing, as the chip's coverage says?"""
import numpy as np
import pytest

import toychip
from toychip import opinfo


@pytest.fixture(scope="module")
def verdicts():
    """relu has a chip kernel, cumsum has none; exp gets a planted wrong kernel (off by one)."""
    with toychip.kernel_scope():
        toychip.register_kernel("aten::exp", lambda a: np.exp(a) + 1)
        result = opinfo.sweep(["nn.functional.relu", "cumsum", "exp"], max_samples=2)
    return result, {row.name: row for row in result.rows}


def test_op_with_a_chip_kernel_is_native(verdicts):
    _, rows = verdicts
    assert (rows["nn.functional.relu"].status, rows["nn.functional.relu"].fallback_ops) == ("native", ())


def test_op_without_a_kernel_is_fallback_and_names_the_aten_op(verdicts):
    _, rows = verdicts
    assert (rows["cumsum"].status, rows["cumsum"].fallback_ops) == ("fallback", ("cumsum.out",))


def test_wrong_kernel_is_failing_with_the_reason(verdicts):
    _, rows = verdicts
    assert rows["exp"].status == "failing"
    assert rows["exp"].reason.startswith("AssertionError: Tensor-likes are not close!")


def test_markdown_lists_each_op_and_the_totals(verdicts):
    result, _ = verdicts
    assert result.totals() == {"native": 1, "fallback": 1, "failing": 1}
    text = result.markdown()
    assert "| cumsum | fallback | 2 | cumsum.out |" in text
    assert text.splitlines()[-1].startswith("totals: native 1, fallback 1, failing 1")  # nothing skipped


def test_ops_pytorch_does_not_compare_with_the_cpu_are_skipped():
    result = opinfo.sweep(["rand_like"], max_samples=1)
    assert (result.rows, result.skipped) == ([], ["rand_like"])
