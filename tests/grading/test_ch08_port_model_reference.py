"""08.port_model's expected values come from the reference's chip kernels: at every end point
of every activation's pieces (where a closed or open range decides), they must be torch's own
CPU kernels' values."""
import pytest
import torch

from course_models import ch08_models as models
from grader.chapters import ch08_porting
from solutions.ch08_porting import port_model


@pytest.mark.parametrize("act", sorted(models.ACTIVATIONS))
@pytest.mark.parametrize("mixed", [False, True])
def test_reference_kernels_are_torchs_at_the_piece_ends(act, mixed):
    built = ch08_porting._ends_case("ends", act, 0, mixed=mixed).build()
    chip = ch08_porting._port_artifact(port_model, built)
    x = built["x"].clone().requires_grad_()
    y = models.ACTIVATIONS[act]()(x)
    y.backward(built["grad"])
    torch.testing.assert_close(chip["output"], y.detach(), rtol=0, atol=0)
    torch.testing.assert_close(chip["input_grad"], x.grad, rtol=1e-6, atol=0)
