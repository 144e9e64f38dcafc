"""Do views alias the chip's memory (inside its bounds), do in-place ops write through them, and do
resizes and out= results keep the kernels' view of it right?"""
import numpy as np
import pytest
import torch

import toychip
from toychip.memory import as_numpy


def test_view_shares_the_storage_buffer(chip_pair):
    _, chip = chip_pair
    view = chip.view(20)
    assert view.untyped_storage()._buf is chip.untyped_storage()._buf


def test_write_through_a_slice_changes_the_base(chip_pair):
    cpu, chip = chip_pair
    chip[1:3, 2:].fill_(9.0)
    cpu[1:3, 2:].fill_(9.0)
    assert torch.equal(chip.cpu(), cpu)


def test_transpose_view_and_inplace_add(chip_pair):
    cpu, chip = chip_pair
    chip.t().add_(1.0)
    cpu.t().add_(1.0)
    assert torch.equal(chip.cpu(), cpu)
    assert torch.equal(chip.t().contiguous().cpu(), cpu.t().contiguous())


def test_as_numpy_respects_strides(chip_pair):
    cpu, chip = chip_pair
    np.testing.assert_array_equal(as_numpy(chip.t()), cpu.t().numpy())
    np.testing.assert_array_equal(as_numpy(chip[:, 1]), cpu[:, 1].numpy())


def test_inplace_ops_on_views_match_cpu(chip_pair):
    cpu, chip = chip_pair
    for t in (cpu, chip):
        t[0].mul_(2.0)
        t[:, 0].zero_()
        t.relu_()
    assert torch.equal(chip.cpu(), cpu)


def test_inplace_restride_and_resize_keep_the_buffer():
    t = torch.arange(12.0).to("toychip")
    t.as_strided_((3, 2), (4, 1), 1)
    assert torch.equal(t.cpu(), torch.arange(12.0).as_strided((3, 2), (4, 1), 1))
    u = torch.arange(4.0).to("toychip")
    u.resize_(2, 3)
    assert u.shape == (2, 3) and torch.equal(u.cpu().flatten()[:4], torch.arange(4.0))


def test_resizing_a_storage_from_python_moves_the_kernels_view_to_the_new_memory():
    t = torch.arange(4.0, device="toychip")
    storage = t.untyped_storage()
    storage.resize_(32)                                  # the runtime's hook: new memory, old bytes kept
    assert storage._raw.ctypes.data == storage.data_ptr() and storage._raw.size == 32
    assert t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_view_past_the_end_of_its_storage_is_refused():
    x = torch.ones(4, device="toychip")
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 16"):
        x.as_strided((1 << 22,), (1,))
    assert x.untyped_storage().nbytes() == 16


def test_resize_counts_bytes_in_the_tensors_dtype_whatever_the_storage_saw_first():
    storage = torch.UntypedStorage(400, device="toychip")          # bytes, seen as uint8
    t = torch.empty(0, device="toychip").set_(storage, 0, (100,), (1,))
    t.resize_(150)
    assert t.untyped_storage().nbytes() == 600 and as_numpy(t).shape == (150,)


def test_a_zero_dimensional_out_result_stays_zero_dimensional():
    out = torch.empty((), device="toychip")
    torch.linalg.vector_norm(torch.ones(3, device="toychip"), out=out)     # through the CPU fallback
    assert out.shape == () and abs(out.item() - 3 ** 0.5) < 1e-6


def test_resizing_memory_that_a_pending_graph_reads_runs_the_graph_first():
    x = torch.ones(4, device="toychip")
    with toychip.lazy():
        y = x * 2
        x.untyped_storage().resize_(8)                            # frees the memory y's graph reads
        assert y.sum().item() == 8.0
    assert toychip.lazy_metrics().sync_reasons["memory_replaced"] >= 1
