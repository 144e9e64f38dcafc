"""Do MLP and CNN training steps match the CPU in eager, lazy and compiled modes?"""
import pytest
import torch


@pytest.mark.parametrize("mode", ["eager", "lazy", "compiled"])
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_training_matches_cpu(run_training, model, mode):
    ref_losses, ref_params = run_training(model, "cpu")
    losses, params = run_training(model, mode)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-5, atol=1e-5)
    for p, q in zip(params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_compiled_optimizer_step_matches_cpu(run_training):
    ref_losses, ref_params = run_training("mlp", "cpu")
    losses, params = run_training("mlp", "compiled", compile_optimizer=True)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-4, atol=1e-4)
    for p, q in zip(params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-3, atol=1e-4)
