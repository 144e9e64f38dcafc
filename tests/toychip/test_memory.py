"""Do views alias the chip's memory, and do in-place ops write through them?"""
import numpy as np
import torch

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
