"""Mirrors OpenReg's tests/test_rng.py: torch.Generator on the chip, the device module's seeds and states.

Upstream skips three tests because OpenReg has no per-device RNG; the chip has one (a
generator per chip in its C++ runtime, toychip.runtime.default_generator), so all three are
mirrored. Upstream's test_rng_state_consistency expects the two chips' default states to
differ without any seeding; they are equal when both chips carry the same seed (as CUDA's
are after torch.manual_seed), so the mirror checks what that test is after: each chip has
a state of its own, seeded, read and restored without touching the other's.
"""
import pytest
import torch

import toychip  # noqa: F401  (registers the chip)

chip = torch.toychip


@pytest.fixture(autouse=True)
def restore_rng_states():
    """The tests reseed both chips; later tests get the states they had before."""
    states = chip.get_rng_state_all()
    yield
    chip.set_rng_state_all(states)


def test_generator():
    generator = torch.Generator(device="toychip:1")
    assert (generator.device.type, generator.device.index) == ("toychip", 1)


def test_rng_state():
    state = chip.get_rng_state(0)
    first = torch.rand(4, device="toychip:0")
    chip.set_rng_state(state, 0)
    assert torch.equal(torch.rand(4, device="toychip:0").cpu(), first.cpu())


def test_manual_seed():
    chip.manual_seed_all(2024)
    assert chip.initial_seed() == 2024


def test_generator_seed():
    for index, seed in ((0, 42), (1, 100)):
        generator = torch.Generator(device=f"toychip:{index}")
        generator.manual_seed(seed)
        assert generator.initial_seed() == seed


def test_generator_state():
    generator = torch.Generator(device="toychip:0")
    state = generator.get_state()
    first = torch.randn(10, device="toychip:0", generator=generator)
    generator.set_state(state)
    assert torch.equal(torch.randn(10, device="toychip:0", generator=generator).cpu(), first.cpu())


def test_rng_state_consistency():
    chip.manual_seed_all(7)
    with chip.device(1):
        chip.manual_seed(8)  # seeds the current chip only
    state0, state1 = chip.get_rng_state(0), chip.get_rng_state(1)
    assert not torch.equal(state0, state1)
    torch.rand(4, device="toychip:0")  # moves chip 0's state, not chip 1's
    assert torch.equal(chip.get_rng_state(1), state1)
    chip.set_rng_state(state0, 0)
    assert torch.equal(chip.get_rng_state(0), state0)
    assert torch.equal(chip.get_rng_state(1), state1)


def test_manual_seed_all():
    for seed in (1234, 5678):
        chip.manual_seed_all(seed)
        assert chip.initial_seed() == seed
        with chip.device(1):
            assert chip.initial_seed() == seed


def test_generator_different_devices():
    on_0, on_1 = torch.Generator(device="toychip:0"), torch.Generator(device="toychip:1")
    on_0.manual_seed(1)
    on_1.manual_seed(1)
    x0 = torch.randn(10, device="toychip:0", generator=on_0)
    x1 = torch.randn(10, device="toychip:1", generator=on_1)
    assert torch.equal(x0.cpu(), x1.cpu())
