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


# -- the torchgen keys real backends use, and torch_npu's custom: section -------------------

HEADER = "backend: PrivateUse1\ncpp_namespace: toychip\n"


@pytest.mark.parametrize("text", [
    "device_guard: true\nuse_out_as_primary: true\nsupported: [relu]\n",
    "class_name: ToyChipNativeFunctions\nextra_headers: ['toychip.h']\nsupported: [relu]\n",
    "supported: [relu]\nsymint: [relu]\nfull_codegen: []\nnon_native: []\nir_gen: []\n",
])
def test_torchgen_backend_keys_are_accepted(tmp_path, text):
    decl = registration.load_declaration(_yaml(tmp_path, HEADER + text))
    assert decl.supported == ("relu",)


@pytest.mark.parametrize("text, message", [
    ("device_guard: yes please\nsupported: [relu]\n", "device_guard must be true or false"),
    ("supported: [relu]\nsymint: [mm]\n", "symint names ops that are not declared: mm"),
    ("supported:\n  - relu: {inplace: true}\n", "options of relu must be among"),
    ("supported: [relu]\ncustom:\n  - scale_add(Tensor self) -> Tensor\n", "a custom entry is '- func: <schema>'"),
    ("supported:\n  - relu:\n    structured: true\n", "relu is marked structured, but it is not an out= overload"),
])
def test_bad_values_of_the_new_keys_are_rejected_with_the_reason(tmp_path, text, message):
    path = _yaml(tmp_path, HEADER + text)
    with pytest.raises(registration.RegistrationError, match=message):
        registration.check(registration.load_declaration(path), op_table.eager_kernels(), {})


def test_structured_out_entry_registers_its_functional_overload_from_the_out_kernel(tmp_path):
    """OpenReg's YAML: maximum.out, structured. The functional maximum is sized by its meta function."""
    path = _yaml(tmp_path, HEADER + "supported:\n  - maximum.out:\n    structured: true\n")
    calls = []

    def maximum_out(a, b, out):
        calls.append(tuple(out.shape))
        return out.copy_(torch.maximum(a.cpu(), b.cpu()))

    lib = torch.library.Library("aten", "IMPL")
    try:
        decl = registration.register(lib, {"maximum.out": maximum_out}, path=path)
        a, b = torch.randn(3, 1, device="toychip"), torch.randn(1, 4, device="toychip")
        got = torch.ops.aten.maximum.default(a, b)
    finally:
        lib._destroy()
    assert decl.structured == ("maximum.out",) and calls == [(3, 4)]
    torch.testing.assert_close(got.cpu(), torch.maximum(a.cpu(), b.cpu()))


def test_device_guard_runs_each_kernel_on_its_tensors_device(tmp_path):
    path = _yaml(tmp_path, HEADER + "device_guard: true\nsupported: [relu]\n")
    seen = []
    lib = torch.library.Library("aten", "IMPL")
    try:
        registration.register(lib, {"relu": lambda t: seen.append(torch.accelerator.current_device_index()) or t},
                              path=path)
        torch.relu(torch.ones(2, device="toychip:1"))
    finally:
        lib._destroy()
    assert seen == [1] and torch.accelerator.current_device_index() == 0


def test_custom_section_defines_a_vendor_op_with_its_schema_and_kernel(tmp_path):
    path = _yaml(tmp_path, HEADER + "supported: []\ncustom:\n"
                 "  - func: scale_add_test(Tensor self, Tensor other, float alpha) -> Tensor\n")
    decl = registration.register(torch.library.Library("aten", "IMPL"), {}, path=path,
                                 custom_kernels={"toychip::scale_add_test": lambda a, b, alpha: a + alpha * b})
    x = torch.ones(3, device="toychip")
    assert decl.custom == ("toychip::scale_add_test(Tensor self, Tensor other, float alpha) -> Tensor",)
    assert torch.ops.toychip.scale_add_test(x, x, 2.0).cpu().tolist() == [3.0, 3.0, 3.0]
    assert str(torch.ops.toychip.scale_add_test.default._schema).startswith("toychip::scale_add_test(Tensor self")


def test_custom_op_without_a_kernel_is_named(tmp_path):
    path = _yaml(tmp_path, HEADER + "custom:\n  - func: vendor_x::f(Tensor self) -> Tensor\n")
    with pytest.raises(registration.RegistrationError, match="custom op vendor_x::f, which has no kernel"):
        registration.register(torch.library.Library("aten", "IMPL"), {}, path=path)


def test_the_chips_own_yaml_guards_devices_so_work_on_chip_1_is_queued_on_chip_1():
    assert registration.load_declaration().device_guard
    a = torch.ones(8, device="toychip:1")
    with toychip.profile() as p:
        b = a + 1
    assert b.device == torch.device("toychip:1") and [(op.device, op.stream) for op in p.timeline] == [(1, 0)]
    assert torch.accelerator.current_device_index() == 0
