"""Mirrors OpenReg's tests/test_rnn.py: torch.nn.LSTM on the chip.

ATen's LSTM takes its fused-cell path for PrivateUse1 tensors: each step calls
``aten::_thnn_fused_lstm_cell`` (and the backward ``_thnn_fused_lstm_cell_backward_impl``),
which the chip's kernel library implements (``lstm_cell``). Upstream's shape checks are kept;
each test here also checks that the steps ran on the chip's kernel, and values against the CPU.
"""
import pytest
import torch
import torch.nn as nn

import toychip

NOT_MIRRORED = {}

INPUT, HIDDEN, SEQ, BATCH = 10, 20, 5, 2


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def run_on_chip(lstm: nn.LSTM, *inputs):
    """The module's output on the CPU and on the chip (the chip's fused cell must have run)."""
    expected = lstm(*inputs)
    toychip.reset_coverage()
    chip_inputs = [tuple(h.to("toychip") for h in x) if type(x) is tuple else x.to("toychip")  # (h0, c0)
                   for x in inputs]
    got = lstm.to("toychip")(*chip_inputs)
    assert toychip.coverage().native.get("_thnn_fused_lstm_cell.default", 0) > 0
    return expected, got


def assert_on_chip_and_close(got, expected):
    assert got.device.type == "toychip"
    torch.testing.assert_close(got.cpu(), expected)


def test_lstm_basic():
    lstm = nn.LSTM(INPUT, HIDDEN, num_layers=1)
    (out_cpu, (h_cpu, c_cpu)), (out, (h, c)) = run_on_chip(lstm, torch.randn(SEQ, BATCH, INPUT))
    assert out.shape == (SEQ, BATCH, HIDDEN)
    assert h.shape == c.shape == (1, BATCH, HIDDEN)
    for got, expected in ((out, out_cpu), (h, h_cpu), (c, c_cpu)):
        assert_on_chip_and_close(got, expected)


def test_lstm_multi_layer():
    lstm = nn.LSTM(INPUT, HIDDEN, num_layers=3)
    (out_cpu, (h_cpu, _)), (out, (h, c)) = run_on_chip(lstm, torch.randn(SEQ, BATCH, INPUT))
    assert out.shape == (SEQ, BATCH, HIDDEN)
    assert h.shape == c.shape == (3, BATCH, HIDDEN)
    assert_on_chip_and_close(out, out_cpu)
    assert_on_chip_and_close(h, h_cpu)


def test_lstm_bidirectional():
    lstm = nn.LSTM(INPUT, HIDDEN, num_layers=2, bidirectional=True)
    (out_cpu, (_, c_cpu)), (out, (h, c)) = run_on_chip(lstm, torch.randn(SEQ, BATCH, INPUT))
    assert out.shape == (SEQ, BATCH, 2 * HIDDEN)
    assert h.shape == c.shape == (2 * 2, BATCH, HIDDEN)
    assert_on_chip_and_close(out, out_cpu)
    assert_on_chip_and_close(c, c_cpu)


def test_lstm_batch_first():
    lstm = nn.LSTM(INPUT, HIDDEN, batch_first=True)
    (out_cpu, _), (out, _) = run_on_chip(lstm, torch.randn(BATCH, SEQ, INPUT))
    assert out.shape == (BATCH, SEQ, HIDDEN)
    assert_on_chip_and_close(out, out_cpu)


def test_lstm_with_initial_hidden():
    lstm = nn.LSTM(INPUT, HIDDEN)
    state = (torch.randn(1, BATCH, HIDDEN), torch.randn(1, BATCH, HIDDEN))
    (out_cpu, (h_cpu, c_cpu)), (out, (h, c)) = run_on_chip(lstm, torch.randn(SEQ, BATCH, INPUT), state)
    for got, expected in ((out, out_cpu), (h, h_cpu), (c, c_cpu)):
        assert_on_chip_and_close(got, expected)
    zero_state = lstm.to("toychip")(torch.zeros(SEQ, BATCH, INPUT, device="toychip"))[1][0]
    assert not torch.equal(h.cpu(), zero_state.cpu())   # the initial state was used


def test_lstm_packed_sequence():
    lstm = nn.LSTM(INPUT, HIDDEN)
    sequences = [torch.randn(n, INPUT) for n in (5, 3, 1)]
    packed = nn.utils.rnn.pack_sequence(sequences, enforce_sorted=True)
    (out_cpu, (h_cpu, c_cpu)), (out, (h, c)) = run_on_chip(lstm, packed)
    assert out.data.device.type == "toychip"
    torch.testing.assert_close(out.data.cpu(), out_cpu.data)
    for got, expected in ((h, h_cpu), (c, c_cpu)):
        assert_on_chip_and_close(got, expected)


def test_lstm_cpu_parity():
    """Outputs and every gradient (input and weights) match the CPU's, through the chip's backward."""
    lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True)
    x = torch.randn(4, 3, 8, requires_grad=True)

    def loss(out, state):
        return out.square().sum() + state[0].sum() + state[1].sum()

    loss(*lstm(x)).backward()
    expected = [x.grad] + [p.grad for p in lstm.parameters()]
    lstm.zero_grad()
    x_chip = x.detach().to("toychip").requires_grad_()
    toychip.reset_coverage()
    out, state = lstm.to("toychip")(x_chip)
    loss(out, state).backward()
    assert toychip.coverage().native["_thnn_fused_lstm_cell_backward_impl.default"] > 0
    for got, want in zip([x_chip.grad] + [p.grad for p in lstm.parameters()], expected):
        torch.testing.assert_close(got.cpu(), want)
