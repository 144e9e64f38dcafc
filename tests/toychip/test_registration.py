"""Does the backend YAML decide what the dispatcher registers, as torchgen's backend YAML does?"""
import subprocess
import sys
import textwrap

import pytest
import torch

import toychip
from toychip import op_table, registration


def test_dispatcher_privateuse1_kernels_equal_the_yaml_supported_list():
    """In a fresh interpreter (no test has added custom kernels): registrations == YAML."""
    script = textwrap.dedent("""
        import torch, toychip
        from toychip import registration
        declared = set(registration.load_declaration().supported)
        registered = registration.registered_ops("PrivateUse1")
        print(sorted(declared ^ registered), len(registered))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", str(len(registration.load_declaration().supported))]


def test_each_declared_op_has_a_privateuse1_kernel_and_an_undeclared_op_has_none():
    for name in registration.load_declaration().supported:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "PrivateUse1"), name
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::cumsum", "PrivateUse1")


def test_yaml_declares_every_kernel_of_the_library():
    declared = registration.load_declaration()
    assert set(declared.supported) == set(op_table.eager_kernels())
    assert (declared.backend, declared.cpp_namespace, declared.autograd) == ("PrivateUse1", "toychip", ())


def _yaml(tmp_path, text):
    path = tmp_path / "backend.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_declared_op_without_a_kernel_is_named(tmp_path):
    path = _yaml(tmp_path, """
        backend: PrivateUse1
        cpp_namespace: toychip
        supported: [relu, cumsum]
        autograd: []
    """)
    lib = torch.library.Library("aten", "IMPL")  # nothing is registered: the check comes first
    message = "aten::cumsum, which has no kernel in toychip/op_table.py"
    with pytest.raises(registration.RegistrationError, match=message):
        registration.register(lib, op_table.eager_kernels(), path=path)


@pytest.mark.parametrize("text, message", [
    ("backend: CUDA\nsupported: [relu]\n", "backend must be PrivateUse1"),
    ("backend: PrivateUse1\nsupported: [relu, relu]\n", "declared twice: relu"),
    ("backend: PrivateUse1\nsupported: [relu.NoSuchOverload]\n", "ATen does not have"),
    ("backend: PrivateUse1\nops: [relu]\n", "unknown keys"),
    ("backend: PrivateUse1\nsupported: [relu]\nautograd: [exp]\n",
     "aten::exp, which has no AutogradPrivateUse1 kernel"),
])
def test_malformed_yaml_is_rejected_with_the_reason(tmp_path, text, message):
    path = _yaml(tmp_path, text)
    with pytest.raises(registration.RegistrationError, match=message):
        registration.register(torch.library.Library("aten", "IMPL"), op_table.eager_kernels(), path=path)


def test_undeclared_op_runs_through_the_fallback():
    toychip.reset_coverage()
    torch.cumsum(torch.ones(3, device="toychip"), 0)
    assert "cumsum.out" in toychip.coverage().fallback  # cumsum is structured: its out= overload
