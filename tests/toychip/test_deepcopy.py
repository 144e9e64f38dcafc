"""Does copy.deepcopy copy chip tensors and models (through the runtime's allocator and ``set_``)?

Run in a subprocess: a regression would be a segfault, which must fail this test, not pytest.
"""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import copy
    import torch
    import toychip

    x = torch.randn(3, device="toychip", requires_grad=True)
    y = copy.deepcopy(x)
    with torch.no_grad():
        y.add_(1)
    print("tensor", torch.equal(y.cpu(), x.detach().cpu() + 1), y.requires_grad, y.device)

    view = x.detach()[1:]
    print("view", torch.equal(copy.deepcopy(view).cpu(), view.cpu()))

    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2)).to("toychip")
    clone = copy.deepcopy(model)
    same = all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(model.state_dict().values(),
                                                           clone.state_dict().values()))
    with torch.no_grad():
        clone[0].weight.zero_()
    print("model", same, bool(model[0].weight.abs().sum() > 0), clone[0].weight.device)

    with toychip.lazy():
        pending = x.detach() * 2
        print("lazy", torch.equal(copy.deepcopy(pending).cpu(), pending.cpu()))
""")


def test_deepcopy_of_chip_tensors_views_models_and_lazy_values():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "tensor True True toychip:0", "view True", "model True True toychip:0", "lazy True"]


def test_cpu_storages_still_clone_with_pytorchs_own_method():
    import toychip  # noqa: F401  (the patch is installed)
    import torch

    storage = torch.arange(4, dtype=torch.float32).untyped_storage()
    copied = storage.clone()
    assert copied.data_ptr() != storage.data_ptr() and bytes(copied) == bytes(storage)
