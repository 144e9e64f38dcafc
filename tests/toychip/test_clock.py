"""Is the simulated clock deterministic and does it charge what the spec says?"""
import pytest
import torch
import torch.nn as nn

import toychip


def _program():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("toychip")
    x = torch.randn(3, 8).to("toychip")
    with toychip.profile() as p:
        model(x).sum().backward()
    return p


def test_same_program_same_numbers():
    first, second = _program(), _program()
    assert first.summary() == second.summary()
    assert first.table() == second.table()


def test_launch_cost_follows_the_spec(chip_pair):
    _, chip = chip_pair
    spec = toychip.ChipSpec(launch_us=100.0)
    with toychip.profile(spec=spec) as p:
        torch.relu(chip)
    assert p.launches == 1
    assert p.time_us == spec.kernel_us(2 * chip.nbytes, chip.numel())
    assert p.time_us >= 100.0


def test_copies_are_charged_over_the_link():
    x = torch.randn(1000)
    with toychip.profile() as p:
        x.to("toychip")
    assert p.copies == 1 and p.copy_bytes == x.nbytes
    assert p.time_us == toychip.DEFAULT_SPEC.copy_us_for(x.nbytes)


def test_no_charges_outside_a_profile(chip_pair):
    _, chip = chip_pair
    torch.relu(chip)
    with toychip.profile() as p:
        pass
    assert p.launches == 0 and p.time_us == 0


@pytest.mark.parametrize("mode", ["eager", "lazy", "compiled"])
def test_training_is_deterministic_in_every_mode(run_training, mode):
    summaries = []
    for _ in range(2):
        with toychip.profile() as p:
            run_training("mlp", mode, steps=2)
        summaries.append(p.summary())
    assert summaries[0] == summaries[1]
    assert summaries[0]["launches"] > 0
