"""Facts about torch 2.13 that chapter 08 (porting to a chip) relies on, each pinned to its sentence.

Facts about the other repositories the chapter cites (OpenReg's files in pytorch/pytorch,
torch_npu's in Ascend/pytorch) are not in the installed torch and are not tested here.
"""
import functools
import json
import inspect
import io
import re
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torchgen

import toychip
import toychip.compiler  # noqa: F401  (registers the Dynamo device interface, adds toychip to Dynamo's skip dirs)
from course_models import ch08_models as models
from facts import backs
from toychip import registration

TORCH_ROOT = Path(torch.__file__).parent
TORCH_INCLUDE = TORCH_ROOT / "include"
ATEN_YAML = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"


def source_of(function) -> str:
    return inspect.getsource(function)


def write_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "backend.yaml"
    path.write_text(text)
    return path


def torchgen_backend_keys() -> list[str]:
    """The keys torchgen's ``parse_backend_yaml`` accepts, as its own error message lists them."""
    from torchgen.gen_backend_stubs import parse_backend_yaml

    source = source_of(parse_backend_yaml)
    listed = re.search(r"valid_keys = \[(.*?)\]", source, re.S).group(1)
    return re.findall(r'"(\w+)"', listed)


# Section 1: the layers of a port

@backs("notebooks/08_porting.ipynb", "`torch.utils.backend_registration.rename_privateuse1_backend`")
def test_privateuse1_renaming_and_method_generation_live_in_backend_registration():
    from torch.utils import backend_registration

    assert callable(backend_registration.rename_privateuse1_backend)
    assert callable(backend_registration.generate_methods_for_privateuse1_backend)


@backs("notebooks/08_porting.ipynb", "`torch._register_device_module`")
def test_a_device_module_is_registered_with_register_device_module():
    assert torch.get_device_module("toychip") is sys.modules["toychip.device"]
    assert "_register_device_module(rename, backend_module)" in source_of(
        torch.utils.backend_registration._setup_privateuseone_for_python_backend)


@backs("notebooks/08_porting.ipynb", "设备守卫（`c10/core/impl/DeviceGuardImplInterface.h`）")
def test_the_device_guard_interface_is_a_c10_header():
    header = TORCH_INCLUDE / "c10" / "core" / "impl" / "DeviceGuardImplInterface.h"
    assert "struct C10_API DeviceGuardImplInterface" in header.read_text()


@backs("notebooks/08_porting.ipynb", "`torch/_dynamo/device_interface.py`（`register_interface_for_device`）")
def test_dynamo_device_interfaces_are_registered_in_device_interface_py():
    from torch._dynamo import device_interface

    assert Path(device_interface.__file__) == TORCH_ROOT / "_dynamo" / "device_interface.py"
    assert callable(device_interface.register_interface_for_device)


@backs("notebooks/08_porting.ipynb", "`get_interface_for_device(\"cuda\").current_device()`")
def test_cuda_has_its_dynamo_device_interface():
    from torch._dynamo.device_interface import CudaInterface, get_interface_for_device

    assert get_interface_for_device("cuda") is CudaInterface
    assert get_interface_for_device("toychip").__name__ == "ToychipInterface"


@backs("notebooks/08_porting.ipynb", "为每种设备类型持有一个 `Backend`")
def test_process_group_holds_a_backend_per_device_type_and_nccl_gloo_are_backends():
    c10d = TORCH_INCLUDE / "torch" / "csrc" / "distributed" / "c10d"
    process_group = (c10d / "ProcessGroup.hpp").read_text()
    assert "class TORCH_API ProcessGroup" in process_group and "deviceTypeToBackend_[deviceType] = backend" in process_group
    assert "class TORCH_API Backend : public torch::CustomClassHolder" in (c10d / "Backend.hpp").read_text()
    assert "class TORCH_API ProcessGroupNCCL : public Backend" in (c10d / "ProcessGroupNCCL.hpp").read_text()
    assert "class TORCH_API ProcessGroupGloo : public Backend" in (c10d / "ProcessGroupGloo.hpp").read_text()


@backs("notebooks/08_porting.ipynb", "`AutocastPrivateUse1` 内核")
def test_autocast_has_a_privateuse1_dispatch_key():
    assert torch._C.DispatchKey.AutocastPrivateUse1.name == "AutocastPrivateUse1"
    assert torch.amp.is_autocast_available("toychip")


# Section 1: a device registered from Python only, asked in a fresh interpreter

@functools.cache
def python_only() -> dict:
    return models.python_only_backend()


@backs("notebooks/08_porting.ipynb", "只转发设备类型")
def test_the_python_backend_device_guard_defines_only_the_device_type():
    from torch.utils.backend_registration import _DummyDeviceGuard

    assert issubclass(_DummyDeviceGuard, torch._C._acc.DeviceGuard)
    assert {name for name in vars(_DummyDeviceGuard) if not name.startswith("__")} == {"type_"}


@backs("notebooks/08_porting.ipynb", "它的流永远是默认流")
def test_a_python_backend_only_ever_has_the_default_stream():
    assert python_only()["stream"] == 0 and python_only()["device_count"] == 1


@backs("notebooks/08_porting.ipynb", "`torch.accelerator.synchronize()` 会报错")
def test_accelerator_synchronize_raises_for_a_python_backend():
    assert "doesn't support synchronizing" in python_only()["torch.accelerator.synchronize()"]


@backs("notebooks/08_porting.ipynb", "存储没有内存（`data_ptr()` 是 0")
def test_a_python_backend_tensor_has_a_null_data_pointer():
    assert python_only()["data_ptr"] == 0


@backs("notebooks/08_porting.ipynb", "锁页内存和 `torch.Generator` 都要钩子")
def test_pinned_memory_and_generators_need_the_privateuse1_hooks():
    for call, hook in (("tensor.pin_memory()", "getPinnedMemoryAllocator"), ("torch.Generator('pyonly')", "getNewGenerator")):
        assert "PrivateUse1HooksInterface" in python_only()[call] and hook in python_only()[call]


# Section 2.1: the C++ runtime

@backs("notebooks/08_porting.ipynb", "守卫用 `C10_REGISTER_GUARD_IMPL`，钩子用 `at::RegisterPrivateUse1HooksInterface`，分配器用 `c10::SetAllocator`")
def test_the_registration_macros_and_functions_exist_in_torchs_headers():
    include = Path(torch.__file__).parent / "include"
    assert "define C10_REGISTER_GUARD_IMPL" in (include / "c10/core/impl/DeviceGuardImplInterface.h").read_text()
    assert "void RegisterPrivateUse1HooksInterface" in (include / "ATen/detail/PrivateUse1HooksInterface.h").read_text()
    assert "void SetAllocator(DeviceType t, Allocator* alloc" in (include / "c10/core/Allocator.h").read_text()


# Section 2.2: the device module, save / load, deepcopy

@backs("notebooks/08_porting.ipynb", "也会调用 torch.toychip.manual_seed_all")
def test_torch_manual_seed_seeds_the_privateuse1_device_module(monkeypatch):
    seeds = []
    monkeypatch.setattr(torch.toychip, "manual_seed_all", seeds.append)
    torch.manual_seed(7)
    assert seeds == [7]


@backs("notebooks/08_porting.ipynb", "`torch.load` 用 `torch.UntypedStorage(nbytes, device=...)` 向分配器要一块存储再拷回去")
def test_loading_onto_a_privateuse1_device_allocates_a_storage_there():
    assert "return obj.to(device=device)" in source_of(torch.serialization._deserialize)
    assert "torch.UntypedStorage(self.size(), device=device)" in source_of(torch._utils._to)


@backs("notebooks/08_porting.ipynb", "`UntypedStorage.clone()`：同样先要一块存储，再 `copy_`")
def test_storage_clone_allocates_a_new_storage_on_the_device():
    assert "new_storage = self.clone()" in source_of(torch.storage._StorageBase.__deepcopy__)
    assert "type(self)(self.nbytes(), device=self.device).copy_(self)" in source_of(torch.storage._StorageBase.clone)


@backs("notebooks/08_porting.ipynb", "用到的只有分配器和三个内存算子：`empty`、`set_` 和 `copy_`")
def test_save_load_and_clone_of_a_chip_storage_call_only_three_memory_ops():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(func.__name__.split(".")[0])
            return func(*args, **(kwargs or {}))

    x, buffer = torch.randn(4, device="toychip"), io.BytesIO()
    with Recorder() as recorder:
        x.untyped_storage().clone()
        torch.save(x, buffer)
        buffer.seek(0)
        torch.load(buffer)
    assert recorder.ops == {"empty", "set_", "copy_"}


# Section 2.3: the caching allocator's statistics

@backs("notebooks/08_porting.ipynb", "统计接口和 `torch.cuda` 一样")
def test_the_chip_memory_functions_and_stat_keys_are_torch_cudas():
    used = ["empty_cache", "reset_peak_memory_stats", "reset_accumulated_memory_stats", "memory_allocated",
            "memory_reserved", "memory_stats", "memory_summary", "max_memory_allocated", "max_memory_reserved"]
    assert all(callable(getattr(torch.cuda, name)) for name in used)
    doc = torch.cuda.memory_stats.__doc__
    assert '"reserved_bytes.{all,large_pool,small_pool}.{current,peak,allocated,freed}"' in doc
    assert '"num_device_alloc"' in doc
    # memory_stats's docstring says "allocated.{...}"; the key memory_summary reads is "allocation"
    assert '("allocation", "Allocations", _format_count)' in source_of(torch.cuda.memory_summary)


@backs("notebooks/08_porting.ipynb", "`Stat::reset_accumulated`")
@backs("lib/toychip/device.py", "As ``torch.cuda``'s: the ``*.allocated`` / ``*.freed`` totals")
@backs("lib/toychip/allocator.py", "both totals restart from 0 on a reset")
def test_resetting_accumulated_stats_zeroes_allocated_and_freed_and_keeps_current_and_peak():
    header = (TORCH_INCLUDE / "c10" / "core" / "Allocator.h").read_text()
    stat = header[header.index("struct Stat {"):]
    stat = stat[:stat.index("};")]
    assert re.search(r"void reset_accumulated\(\) \{\s*allocated = 0;\s*freed = 0;\s*\}", stat)
    assert re.search(r"void reset_peak\(\) \{\s*peak = current;\s*\}", stat)
    doc = " ".join(torch.cuda.reset_accumulated_memory_stats.__doc__.split())
    assert 'Accumulated stats correspond to the `"allocated"` and `"freed"` keys' in doc


# Section 2.4: streams, non_blocking, pinned memory

@backs("notebooks/08_porting.ipynb", "`non_blocking=True` 只在源张量位于锁页内存时才让拷贝对主机异步")
def test_tensor_cuda_docs_tie_non_blocking_to_pinned_memory():
    doc = " ".join(torch.Tensor.cuda.__doc__.split())
    assert "If ``True`` and the source is in pinned memory, the copy will be asynchronous with respect to the host" in doc


@backs("notebooks/08_porting.ipynb", "`DataLoader(pin_memory=True)` 锁页")
def test_data_loader_has_a_pin_memory_switch():
    assert inspect.signature(torch.utils.data.DataLoader).parameters["pin_memory"].default is False


@backs("notebooks/08_porting.ipynb", "`torch.profiler` 的 `export_chrome_trace`")
def test_the_profiler_exports_chrome_traces():
    assert callable(torch.profiler.profile.export_chrome_trace)


# Section 3: the backend YAML and torchgen

@backs("notebooks/08_porting.ipynb", "只用 torchgen 认识的键里的四个")
@backs("notebooks/08_porting.ipynb", "还有 torchgen 也认识的 `symint`")
def test_torchgen_backend_yaml_keys():
    keys = torchgen_backend_keys()
    assert {"backend", "cpp_namespace", "supported", "autograd", "symint"} <= set(keys)
    assert "custom" not in keys


@backs("notebooks/08_porting.ipynb", "torchgen 自己的 `parse_backend_yaml` 读一遍")
def test_torchgen_reads_the_chips_backend_yaml():
    assert models.torchgen_reads(registration.YAML_PATH).startswith("接受：backend=PrivateUse1, cpp_namespace=toychip")


@backs("notebooks/08_porting.ipynb", "`backend: NPU`，不是调度键的名字")
def test_npu_is_not_a_dispatch_key():
    from torchgen.model import DispatchKey

    assert "NPU" not in DispatchKey.__members__ and "PrivateUse1" in DispatchKey.__members__


@backs("notebooks/08_porting.ipynb", "这三样 torchgen 都不接受")
def test_torchgen_rejects_a_torch_npu_style_backend_yaml(tmp_path):
    header = "cpp_namespace: at_npu::native\nsupported:\n"
    npu_style = ["backend: NPU\n" + header + "  - abs\n",
                 "backend: PrivateUse1\n" + header + "  - abs\ncustom:\n  - func: f(Tensor self) -> Tensor\n",
                 "backend: PrivateUse1\n" + header + "  - func: copy_\n    op_api: True\n"]
    for text in npu_style:
        assert models.torchgen_reads(write_yaml(tmp_path, text)).startswith("拒绝"), text


@backs("notebooks/08_porting.ipynb", "给了 `--impl-path` 时")
def test_torchgen_checks_declared_kernels_only_with_an_impl_path():
    from torchgen import gen_backend_stubs

    source = source_of(gen_backend_stubs.run)
    assert "if impl_path is not None:" in source
    assert source.index("if impl_path is not None:") < source.index("error_on_missing_kernels(")


@backs("notebooks/08_porting.ipynb", "再生成 `TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)` 注册代码")
def test_torchgen_generates_a_torch_library_impl_block_for_the_backend_key():
    from torchgen import gen_backend_stubs

    assert "TORCH_LIBRARY_IMPL(aten, $dispatch_key, m)" in inspect.getsource(gen_backend_stubs)


@backs("notebooks/08_porting.ipynb", "默认重载（`aten::relu.default`）只写 `relu`")
def test_torchgen_names_leave_out_the_default_overload():
    from torchgen.model import OperatorName

    assert torch.ops.aten.relu.default._schema.overload_name == ""
    assert str(OperatorName.parse("relu")) == "relu"
    assert OperatorName.parse("add.Tensor").overload_name == "Tensor"


def yaml_entry(op: str) -> str:
    """``op``'s entry (its functional overload) in native_functions.yaml."""
    return re.search(rf"^- func: {op}\(.*?(?=^- func:)", ATEN_YAML.read_text(), re.S | re.M).group(0)


@backs("notebooks/08_porting.ipynb", "结构化（structured）")
def test_cumsum_and_tril_are_structured_with_a_composite_functional_kernel():
    for op in ("cumsum", "tril"):
        assert f"structured_delegate: {op}.out" in yaml_entry(op)
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "CompositeExplicitAutogradNonFunctional")


# Section 4: torch.compile

@backs("notebooks/08_porting.ipynb", "编译后端通过入口点组 `torch_dynamo_backends` 注册")
def test_dynamo_discovers_backends_in_the_torch_dynamo_backends_group():
    from torch._dynamo.backends import registry

    assert 'group_name = "torch_dynamo_backends"' in source_of(registry._discover_entrypoint_backends)


@backs("notebooks/08_porting.ipynb", "file is under skip directory")
def test_dynamo_breaks_on_chip_stream_calls_because_toychip_is_skipped():
    def wait_for_copy(x, copy_stream):
        y = torch.relu(x)
        torch.toychip.current_stream().wait_stream(copy_stream)
        return y * 2

    torch._dynamo.reset()
    try:
        explanation = torch._dynamo.explain(wait_for_copy)(torch.randn(4, device="toychip"), torch.toychip.Stream())
    finally:
        torch._dynamo.reset()
    assert explanation.graph_break_count == 1
    assert "skip reason: file is under skip directory" in explanation.break_reasons[0].reason


@backs("notebooks/08_porting.ipynb", "用 `trace_rules.add(\"toychip\")` 把整个 `toychip` 包放进了 Dynamo 的跳过目录")
def test_trace_rules_add_puts_a_package_directory_in_dynamos_skip_dirs():
    from torch._dynamo import trace_rules

    assert "SKIP_DIRS.append(_strip_init_py(origin))" in source_of(trace_rules.add)
    assert str(Path(toychip.__file__).parent) + "/" in trace_rules.SKIP_DIRS


@backs("notebooks/08_porting.ipynb", "Dynamo 认得它们（`torch/_dynamo/variables/builder.py` 里的 `StreamVariable`）")
def test_dynamo_wraps_torch_stream_instances_as_stream_variables():
    from torch._dynamo.variables.builder import VariableBuilder

    source = source_of(VariableBuilder._wrap)
    stream_branch = source[source.index("elif isinstance(value, torch.Stream):"):]
    assert stream_branch.index("StreamVariable(") < stream_branch.index("elif isinstance(value, torch.Event):")


@backs("notebooks/08_porting.ipynb", "`torch.compile(model)` 不写 `backend` 时用的是 Inductor")
def test_the_default_compile_backend_is_inductor():
    from torch._dynamo.backends.registry import get_default_backend

    assert inspect.signature(torch.compile).parameters["backend"].default is None
    assert "backend = get_default_backend()" in source_of(torch.compile)
    assert get_default_backend() == "inductor"


@backs("notebooks/08_porting.ipynb", "`torch.utils.backend_registration._get_custom_mod_func` 按名字 `Scheduling`、`PythonWrapperCodegen`、`CppWrapperCodegen`、`WrapperFxCodegen` 到 `torch.toychip` 上取这四个类")
def test_inductor_asks_a_privateuse1_device_module_for_its_codegen_classes():
    from torch._inductor.codegen import common

    source = source_of(common.init_backend_registration)
    assert "_get_custom_mod_func" in source and "init_backend_registration" in source_of(common.get_backend_features)
    names = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")
    assert [name for name in names if f'_get_custom_mod_func("{name}")' in source] == list(names)


@backs("notebooks/08_porting.ipynb", "缺一个，`_get_custom_mod_func` 就抛 `RuntimeError`，Inductor 把它吞掉：设备没有登记，也不报错")
def test_a_device_module_missing_one_codegen_class_is_not_registered_silently():
    from torch._inductor.codegen import common
    from torch.utils import backend_registration

    assert "raise RuntimeError(message)" in source_of(backend_registration._get_custom_mod_func)
    source = source_of(common.init_backend_registration)
    registration = source[source.index('_get_custom_mod_func("Scheduling")'):]
    assert "except RuntimeError:\n            pass" in registration


@backs("notebooks/08_porting.ipynb", "把一个 `DeviceCodegen` 放进 `device_codegens`")
def test_inductor_device_registration_tables():
    from torch._inductor.codegen import common

    assert list(inspect.signature(common.register_backend_for_device).parameters)[:4] == [
        "device", "device_scheduling", "device_wrapper_codegen", "device_cpp_wrapper_codegen"]
    assert "device_codegens[device] = DeviceCodegen(" in source_of(common.register_backend_for_device)
    assert "device_op_overrides_dict[device] = device_op_overrides" in source_of(common.register_device_op_overrides)


@backs("notebooks/08_porting.ipynb", "是 Inductor 的 SIMD 调度类（`SIMDScheduling`，Triton 的调度类也是它的子类）")
def test_tritons_scheduling_is_a_simd_scheduling():
    from torch._inductor.codegen.simd import SIMDScheduling
    from torch._inductor.codegen.triton import TritonScheduling

    assert issubclass(TritonScheduling, SIMDScheduling)


@backs("notebooks/08_porting.ipynb", "Inductor 默认把它降低成外部调用")
def test_inductor_lowers_mm_to_an_extern_call_unless_autotuning():
    from torch._inductor import config

    assert config.max_autotune is False and config.max_autotune_gemm is False


@backs("notebooks/08_porting.ipynb", "Inductor 从设备属性里读 SM 的个数（`multi_processor_count`）")
def test_inductor_reads_the_sm_count_from_device_properties():
    from torch._inductor.runtime.hints import DeviceProperties

    assert "multi_processor_count" in source_of(DeviceProperties.create)


# Section 5.1: what a fallback costs, for the porting plan

def fallback_of(call) -> tuple[dict, toychip.Profile]:
    """The ops ``call`` sent to the CPU fallback on a chip tensor, and its profile."""
    x = torch.randn(16, 32).to("toychip")
    toychip.reset_coverage()
    with toychip.profile() as p:
        call(x)
    return dict(toychip.coverage().fallback), p


@backs("notebooks/08_porting.ipynb", "主机上的计算不计时")
def test_a_fallback_is_charged_its_copies_only():
    fallbacks, p = fallback_of(lambda x: torch.flip(x, [0]))
    assert fallbacks == {"flip.default": 1}
    assert p.launches == 0 and p.copies == 2
    assert p.time_us == pytest.approx(sum(s.time_us for name, s in p.kernels.items() if name.startswith("copy:")))


@backs("notebooks/08_porting.ipynb", "`cumsum` 和 `atan2` 走的是 `.out` 变体")
def test_structured_cumsum_and_atan2_fall_back_through_out_copying_the_out_buffer_too():
    for op in ("cumsum", "atan2"):
        assert f"structured_delegate: {op}.out" in yaml_entry(op)
    assert fallback_of(lambda x: torch.cumsum(x, 1))[0] == {"cumsum.out": 1}
    assert fallback_of(lambda x: torch.cumsum(x, 1))[1].copies == 3      # input, out buffer, result back
    assert fallback_of(lambda x: torch.atan2(x, x))[0] == {"atan2.out": 1}
    assert fallback_of(lambda x: torch.atan2(x, x))[1].copies == 4


@backs("notebooks/08_porting.ipynb", "profile 可以嵌套，每一笔计费都记到所有打开的 profile 上")
def test_nested_profiles_each_receive_every_charge():
    x = torch.randn(8).to("toychip")
    with toychip.profile() as outer:
        torch.relu(x)
        with toychip.profile() as inner:
            torch.flip(x, [0])
    assert (inner.launches, inner.copies) == (0, 2)
    assert (outer.launches, outer.copies) == (1, 2)


# Section 5.2: what the compiled step decomposes, section 7's kernel arguments

def core_aten_calls(fn, *args, keep=()) -> list[str]:
    """The ATen calls of ``fn`` traced with core ATen's decompositions, minus those of ``keep``
    (ops a backend has kernels for, as the chip keeps ``select_scatter`` and ``any``)."""
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    table = {op: fn for op, fn in core_aten_decompositions().items() if op not in keep}
    graph = make_fx(fn, decomposition_table=table)(*args).graph
    return [str(node.target) for node in graph.nodes if node.op == "call_function"]


@backs("notebooks/08_porting.ipynb", "`select_backward` 分解成 `new_zeros` + `select_scatter`，`new_zeros` 再变成 `full`")
def test_core_aten_decomposes_select_backward_into_full_and_select_scatter():
    aten = torch.ops.aten
    calls = core_aten_calls(lambda grad: aten.select_backward(grad, [3, 4], 0, 1), torch.randn(4),
                            keep={aten.select_scatter.default})
    assert calls == ["aten.full.default", "aten.select_scatter.default"]


@backs("notebooks/08_porting.ipynb", "eager 运行的是它的 C++ 组合内核（`CompositeExplicitAutograd`）")
@backs("notebooks/08_porting.ipynb", "内核里调用的 `isneginf`、`all` 和 `where` 的 `out=` 版本芯片都没有")
def test_eager_safe_softmax_is_a_composite_kernel_whose_isneginf_all_and_where_out_fall_back():
    rows = torch._C._dispatch_dump("aten::_safe_softmax").splitlines()
    assert any(row.startswith("CompositeExplicitAutograd[alias]:") for row in rows)
    assert not any(row.startswith(("CPU:", "PrivateUse1:")) for row in rows)
    before = toychip.coverage().fallback
    torch.ops.aten._safe_softmax(torch.randn(2, 3).to("toychip"), -1)
    after = toychip.coverage().fallback
    assert {op for op in after if after[op] > before.get(op, 0)} == {"isneginf.out", "all.out", "where.self_out"}


@backs("notebooks/08_porting.ipynb", "拆成 `_softmax`、`eq`、`all`、`zeros_like`、`where`")
@backs("notebooks/08_porting.ipynb", "`all` 再拆成 `logical_not`、`any`、`logical_not`，`zeros_like` 变成 `full_like`")
def test_core_aten_decomposes_safe_softmax_down_to_any():
    aten = torch.ops.aten
    assert core_aten_calls(lambda x: aten._safe_softmax(x, -1), torch.randn(2, 3),
                           keep={aten.all.dim, aten.zeros_like.default}) == [
        "aten._softmax.default", "aten.eq.Scalar", "aten.all.dim", "aten.zeros_like.default", "aten.where.self"]
    assert core_aten_calls(lambda x: aten._safe_softmax(x, -1), torch.randn(2, 3), keep={aten.any.dim}) == [
        "aten._softmax.default", "aten.eq.Scalar", "aten.logical_not.default", "aten.any.dim",
        "aten.logical_not.default", "aten.full_like.default", "aten.where.self"]


@backs("notebooks/08_porting.ipynb", "但末尾那些等于模式默认值的参数，调度器不传")
@backs("notebooks/08_porting.ipynb", "写成 `def leaky_relu(a, negative_slope)` 会因缺参数失败")
def test_a_trailing_argument_equal_to_its_default_is_not_passed_to_a_python_kernel():
    from torch.library import Library

    schema = str(torch.ops.aten.leaky_relu.default._schema).removeprefix("aten::")
    library = Library("ch08facts_defaults", "DEF")
    try:
        seen = []
        library.define(schema)
        library.impl("leaky_relu", lambda *args: seen.append(args[1:]) or args[0].clone(), "CPU")
        torch.ops.ch08facts_defaults.leaky_relu(torch.ones(1), 0.01)
        torch.ops.ch08facts_defaults.leaky_relu(torch.ones(1), 0.2)
    finally:
        library._destroy()
    assert seen == [(), (0.2,)]


@backs("notebooks/08_porting.ipynb", "`leaky_relu` 的 `negative_slope=0.01`，`hardtanh` 的 `min_val=-1`、`max_val=1`；反向算子的参数都没有默认值")
@backs("notebooks/08_porting.ipynb", "`nn.LeakyReLU()` 的 `negative_slope` 就是 `leaky_relu` 模式里的默认值 `0.01`")
def test_the_activation_schemas_defaults():
    aten = torch.ops.aten
    defaults = {str(op): {arg.name: arg.default_value for arg in op._schema.arguments if arg.has_default_value()}
                for op in (aten.hardswish.default, aten.leaky_relu.default, aten.hardtanh.default,
                           aten.hardswish_backward.default, aten.leaky_relu_backward.default,
                           aten.hardtanh_backward.default)}
    assert defaults == {"aten.hardswish.default": {}, "aten.leaky_relu.default": {"negative_slope": 0.01},
                        "aten.hardtanh.default": {"min_val": -1, "max_val": 1}, "aten.hardswish_backward.default": {},
                        "aten.leaky_relu_backward.default": {}, "aten.hardtanh_backward.default": {}}
    assert nn.LeakyReLU().negative_slope == 0.01


# Section 6: distributed and packaging

@backs("notebooks/08_porting.ipynb", "CUDA 用 NCCL")
def test_nccl_is_cudas_default_collective_backend():
    assert dist.Backend.default_device_backend_map["cuda"] == "nccl"


@backs("notebooks/08_porting.ipynb", "`Backend.register_backend(name, creator, devices=[...])`")
def test_register_backend_takes_the_devices_it_serves():
    assert "devices" in inspect.signature(dist.Backend.register_backend).parameters
    assert "Backend.default_device_backend_map[device] = name.lower()" in source_of(dist.Backend.register_backend)


@backs("notebooks/08_porting.ipynb", "不指定 backend：用本机加速器登记的后端")
def test_init_process_group_without_a_backend_uses_the_accelerators_registered_backend():
    from torch.distributed import distributed_c10d

    assert inspect.signature(dist.init_process_group).parameters["backend"].default is None
    assert 'backend = "undefined"' in source_of(dist.init_process_group)
    config = source_of(distributed_c10d.BackendConfig.__init__)
    branch = config[config.index("if backend == Backend.UNDEFINED:"):]
    assert branch.index("device_type = torch._C._get_accelerator().type") < branch.index(
        "Backend.default_device_backend_map[device_type]")
    assert torch._C._get_accelerator().type == "toychip"


@backs("notebooks/08_porting.ipynb", "importlib.metadata.entry_points(group=...)")
def test_entry_points_are_found_by_group_with_importlib_metadata():
    import importlib.metadata

    assert all(ep.group == "console_scripts" for ep in importlib.metadata.entry_points(group="console_scripts"))


@backs("notebooks/08_porting.ipynb", "找出某个**入口点组**（entry-point group）里声明的所有入口点，加载并调用它们")
def test_import_device_backends_loads_and_calls_the_torch_backends_entry_points():
    source = source_of(torch._import_device_backends)
    assert 'group_name = "torch.backends"' in source
    assert "entrypoint = backend_extension.load()" in source and "entrypoint()" in source


@backs("notebooks/08_porting.ipynb", "`import torch` 会调用 `torch/__init__.py` 的 `_import_device_backends()`")
def test_import_torch_calls_import_device_backends():
    init = (TORCH_ROOT / "__init__.py").read_text()
    assert "if _is_device_backend_autoload_enabled():\n    _import_device_backends()" in init


@backs("notebooks/08_porting.ipynb", "环境变量 `TORCH_DEVICE_BACKEND_AUTOLOAD=0` 关闭")
def test_torch_device_backend_autoload_zero_turns_autoloading_off(monkeypatch):
    monkeypatch.setenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    assert torch._is_device_backend_autoload_enabled() is False
    monkeypatch.delenv("TORCH_DEVICE_BACKEND_AUTOLOAD")
    assert torch._is_device_backend_autoload_enabled() is True


@backs("notebooks/08_porting.ipynb", "`_import_device_backends` 文档字符串引用")
def test_import_device_backends_cites_the_autoload_rfc():
    assert "https://github.com/pytorch/pytorch/issues/122468" in torch._import_device_backends.__doc__


# Section 7: OpInfo

@backs("notebooks/08_porting.ipynb", "`torch/testing/_internal/common_methods_invocations.py` 的 `op_db`")
def test_op_db_is_defined_in_common_methods_invocations():
    path = TORCH_ROOT / "testing" / "_internal" / "common_methods_invocations.py"
    assert re.search(r"^op_db: list\[OpInfo\] = \[", path.read_text(), re.M)


@backs("notebooks/08_porting.ipynb", "设备无关的测试（device-generic tests）用它在任意设备上运行同一批测试")
def test_device_generic_tests_are_instantiated_per_device_type():
    source = (TORCH_ROOT / "testing" / "_internal" / "common_device_type.py").read_text()
    assert re.search(r"^def instantiate_device_type_tests\(", source, re.M)
    assert re.search(r"^class ops\b", source, re.M)      # the decorator that runs a test once per OpInfo


@backs("notebooks/08_porting.ipynb", "导入 `op_db` 需要 `expecttest` 包")
def test_importing_op_db_imports_expecttest():
    internal = TORCH_ROOT / "testing" / "_internal"
    assert re.search(r"^import expecttest$", (internal / "common_utils.py").read_text(), re.M)
    assert "from torch.testing._internal.common_utils import" in (internal / "common_methods_invocations.py").read_text()


# Section 9: the capstone's stack

@backs("notebooks/08_porting.ipynb", "`leaky_relu` 和 `hardtanh` 的前向不在表里，留在图里成为岛外的节点")
@backs("notebooks/08_porting.ipynb", "三个前向都是 core ATen 算子，core 分解表不拆它们，三个反向则不是")
@backs("notebooks/08_porting.ipynb", "PyTorch 其实也给了 `leaky_relu`、`hardtanh` 的分解")
def test_chip_table_decomposes_gelu_but_not_leaky_relu_or_hardtanh_forward():
    from torch._decomp import core_aten_decompositions, decomposition_table

    from toychip.compiler import chip_decompositions

    aten, table = torch.ops.aten, chip_decompositions()
    assert {aten.gelu.default, aten.gelu_backward.default, aten.leaky_relu_backward.default,
            aten.hardtanh_backward.default} <= table.keys()
    assert not {aten.leaky_relu.default, aten.hardtanh.default} & table.keys()
    assert torch.Tag.core in aten.leaky_relu.default.tags and torch.Tag.core in aten.hardtanh.default.tags
    core = core_aten_decompositions()
    forwards, backwards = (aten.gelu, aten.leaky_relu, aten.hardtanh), (aten.gelu_backward, aten.leaky_relu_backward,
                                                                        aten.hardtanh_backward)
    assert all(torch.Tag.core in op.default.tags and op.default not in core for op in forwards)
    assert all(op.default in core for op in backwards)
    assert {aten.leaky_relu.default, aten.hardtanh.default} <= decomposition_table.keys()


@backs("notebooks/08_porting.ipynb", "没有梯度的图，比如优化器步，默认也交给 `fw_compiler`")
def test_aot_autograd_compiles_inference_graphs_with_the_forward_compiler():
    from torch._dynamo.backends.common import aot_autograd

    seen = []

    def fw_compiler(gm, example_inputs):
        seen.append("forward")
        return gm.forward
    torch._dynamo.reset()
    torch.compile(lambda t: t.mul_(2), backend=aot_autograd(fw_compiler=fw_compiler))(torch.ones(3))
    assert seen == ["forward"]


@backs("notebooks/08_porting.ipynb", "它的梯度在数学上是 0，算出来只是极小的浮点噪声")
def test_key_bias_gradient_is_noise_that_adamw_amplifies():
    model, _, x, targets = models.block_workload("cpu")
    model(x, targets).backward()
    width = model.qkv.bias.shape[0] // 3
    grad = model.qkv.bias.grad
    assert grad[width:2 * width].abs().max() < 1e-6 * grad[2 * width:].abs().max()
    cpu, chip = models.train_block(device="cpu"), models.train_block()
    names = [name for name, _ in model.named_parameters()]
    differing = [name for name, a, b in zip(names, chip["params"], cpu["params"])
                 if (a - b).abs().max() > 1e-5 * b.abs().max()]
    assert differing == ["qkv.bias"]


@backs("notebooks/08_porting.ipynb", "每个文件的第一行写着 OpenReg 和 `torch_npu` 里做同一件事的文件")
def test_each_runtime_file_in_the_table_exists_and_its_first_line_names_the_rows_counterparts():
    cells = json.loads(Path("notebooks/08_porting.ipynb").read_text(encoding="utf-8"))["cells"]
    text = "".join(next(c["source"] for c in cells if "### 2.1 C++ 运行时" in "".join(c["source"])))
    rows = [line.split(" | ") for line in text.splitlines() if "`ToyChip" in line and line.startswith("|")]
    csrc = Path(toychip.__file__).parent / "csrc"
    assert len(rows) == 7
    for _, _, ours, openreg, npu in (row[:5] for row in rows):
        ours = re.findall(r"`(ToyChip\w+\.cpp)`", ours)[0]
        first_line = (csrc / ours).read_text().splitlines()[0]
        for column in (openreg, npu):
            stems = {Path(name).stem for name in re.findall(r"`([^`]+\.(?:cpp|h))`", column)}
            assert any(stem in first_line for stem in stems), (ours, first_line, stems)


@backs("notebooks/08_porting.ipynb", "里的九个 `.cpp` 文件（及其头文件），其中七个对应 OpenReg `csrc/runtime/` 里做同样事情的文件")
def test_the_runtime_has_nine_cpp_files_seven_of_them_beside_openregs_runtime_files():
    first_lines = [path.read_text().splitlines()[0] for path in (Path(toychip.__file__).parent / "csrc").glob("*.cpp")]
    assert len(first_lines) == 9
    assert sum("OpenReg's csrc/runtime/" in line for line in first_lines) == 7
    assert sum("csrc/profiler/stubs/openreg.cpp" in line for line in first_lines) == 1
    profiler = (Path(toychip.__file__).parent / "csrc" / "ToyChipProfiler.cpp").read_text()
    assert "csrc/profiler/OpenRegActivityProfiler.cpp and\n// OpenRegActivityProfilerSession.cpp" in profiler


# ---- conformance (issue 31, part 3) ----

@backs("notebooks/08_porting.ipynb", "`device_guard` 和 `use_out_as_primary`（取 `true`/`false`）、`symint`、`class_name`")
@backs("notebooks/08_porting.ipynb", "`device_guard` 和 `use_out_as_primary` 能读，却不在那份列表里")
@backs("notebooks/08_porting.ipynb", "懒张量（lazy tensor）代码生成器 `torchgen/gen_lazy_tensor.py` 读的 `full_codegen`、`non_native`、`ir_gen`")
def test_torch_2_13_parse_backend_yaml_keys():
    """The error message's list, plus the two boolean keys it pops without listing."""
    from torchgen.gen_backend_stubs import parse_backend_yaml

    assert set(torchgen_backend_keys()) == {"backend", "class_name", "cpp_namespace", "extra_headers", "supported",
                                            "autograd", "full_codegen", "non_native", "ir_gen", "symint"}
    source = source_of(parse_backend_yaml)
    for key in ("device_guard", "use_out_as_primary"):
        assert re.search(rf'yaml_values\.pop\("{key}", False\)', source) and f"either True or False for {key}" in source
    from torchgen import gen_lazy_tensor
    lazy = source_of(gen_lazy_tensor)
    assert all(f'"{key}"' in lazy for key in ("full_codegen", "non_native", "ir_gen"))


@backs("notebooks/08_porting.ipynb", "torch 2.13 的 torchgen 还不接受带选项的条目")
def test_torch_2_13_torchgen_rejects_an_openreg_style_structured_entry(tmp_path):
    text = ("backend: PrivateUse1\ncpp_namespace: at::native::openreg\nuse_out_as_primary: true\ndevice_guard: true\n"
            "supported:\n  - maximum.out:\n    structured: true\n")
    assert models.torchgen_reads(write_yaml(tmp_path, text)).startswith("拒绝")
    assert registration.load_declaration(write_yaml(tmp_path, text)).structured == ("maximum.out",)


@backs("notebooks/08_porting.ipynb", "同样的值放进非连续张量，`SampleInput.noncontiguous()`")
@backs("notebooks/08_porting.ipynb", "`supports_out` 的 OpInfo")
def test_opinfo_has_noncontiguous_samples_and_supports_out():
    from torch.testing._internal.opinfo.core import OpInfo, SampleInput

    assert callable(SampleInput.noncontiguous) and "supports_out" in inspect.signature(OpInfo).parameters


@backs("notebooks/08_porting.ipynb", "PyTorch 自己的 `test_compare_cpu` 也把这个 OpInfo 标成预期失败")
@backs("notebooks/08_porting.ipynb", "`.cpu()` 只拷贝视图本身，得到的新存储从 0 开始")
def test_pytorch_expects_as_strided_partial_views_to_differ_from_a_cpu_copy():
    import unittest

    from toychip import opinfo

    partial = next(op for op in opinfo.op_db() if opinfo.opinfo_name(op) == "as_strided.partial_views")
    assert any(d.cls_name == "TestCommon" and d.test_name == "test_compare_cpu" and unittest.expectedFailure in d.decorators
               for d in partial.decorators if hasattr(d, "test_name"))
    view = torch.arange(10.0)[5:]
    assert (view.clone().storage_offset(), torch.arange(10.0, device="toychip")[5:].cpu().storage_offset()) == (0, 0)


@backs("notebooks/08_porting.ipynb", "PyTorch 的 `mode` 只接受 CPU、CUDA 和 XPU 张量")
def test_mode_refuses_other_devices():
    with pytest.raises(RuntimeError, match="mode only supports CPU, CUDA and XPU device type, got: toychip"):
        torch.mode(torch.ones(3, device="toychip"), out=(torch.empty(0, device="toychip"),
                                                          torch.empty(0, dtype=torch.long, device="toychip")))


# ---- collectives ----
def _fsdp_collectives_source() -> str:
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives

    return inspect.getsource(_fsdp_collectives)


@backs("notebooks/08_porting.ipynb", "`all_gather_into_tensor` 现在叫 `all_gather_single`，`reduce_scatter_tensor` 现在叫 `reduce_scatter_single`；旧名字仍能用，调用时发出 `FutureWarning`")
def test_2_13_renames_the_single_tensor_gather_and_reduce_scatter_and_warns_on_the_old_names():
    chip = torch.zeros(2, device="toychip")
    for old, new in ((dist.all_gather_into_tensor, "all_gather_single"),
                     (dist.reduce_scatter_tensor, "reduce_scatter_single")):
        with pytest.warns(FutureWarning, match=f"use `torch.distributed.{new}`"), pytest.raises(ValueError):
            old(chip, chip)  # no process group: the warning comes first
        assert f"return {new}(" in source_of(old)


@backs("notebooks/08_porting.ipynb", "函数式集合通信也改了名，旧名字 `all_gather_tensor` 同样已弃用")
def test_functional_all_gather_tensor_is_a_deprecated_spelling_of_all_gather_single():
    from torch.distributed import _functional_collectives as funcol

    source = source_of(funcol.all_gather_tensor)
    assert "FutureWarning" in source and "return all_gather_single(" in source


@backs("notebooks/08_porting.ipynb", "`all_gather_single_coalesced` 转发，`all_gather_single` 不转发")
def test_pyprocessgroup_forwards_the_coalesced_gather_to_python_but_not_the_single_one():
    header = (TORCH_INCLUDE / "torch" / "csrc" / "distributed" / "c10d" / "PyProcessGroup.hpp").read_text()
    assert "c10::intrusive_ptr<Work> all_gather_single_coalesced(" in header
    assert "c10::intrusive_ptr<Work> all_gather_single(" not in header
    assert "c10::intrusive_ptr<Work> reduce_scatter_single(" not in header


@backs("notebooks/08_porting.ipynb", "C++ 的 `ProcessGroup` 把名字存在按设备登记的后端里，而 Python 分组一个后端也没有")
def test_a_python_process_group_without_backends_has_no_name():
    class Bare(dist.ProcessGroup):
        pass

    with pytest.raises(RuntimeError, match="ProcessGroup name not set"):
        Bare(0, 1).group_name


@backs("notebooks/08_porting.ipynb", "算一层之前，它用 `all_gather_single` 把这一层的参数拼完整")
def test_fsdp2_gathers_and_reduce_scatters_with_the_2_13_names_only():
    source = _fsdp_collectives_source()
    assert "dist.all_gather_single(" in source and "dist.reduce_scatter_single(" in source
    assert "dist.all_gather_into_tensor(" not in source and "dist.reduce_scatter_tensor(" not in source


@backs("notebooks/08_porting.ipynb", "每个参数沿第 0 维切成 world size 份（DTensor 的 `Shard(0)`）")
def test_fully_shard_shards_dim_0_by_default():
    from torch.distributed.fsdp import fully_shard

    assert "``None``: Use default sharding (Shard(0))" in fully_shard.__doc__


@backs("notebooks/08_porting.ipynb", "`reshard_after_forward` 不指定时，非根模块前向一结束就丢掉拼出来的参数，反向时再拼一次")
def test_reshard_after_forward_defaults_to_true_for_non_root_modules():
    from torch.distributed.fsdp import fully_shard

    doc = " ".join(fully_shard.__doc__.split())
    assert inspect.signature(fully_shard).parameters["reshard_after_forward"].default is None
    assert "If ``None``, it is set to ``True`` for non-root modules" in doc
    assert "reshards parameters after forward and re-all-gathers in backward" in doc


@backs("notebooks/08_porting.ipynb", "float32 用 `ReduceOp.AVG`")
def test_fsdp2_averages_float32_gradients_with_reduce_op_avg():
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import _get_gradient_divide_factors

    class TwoRanks:
        def size(self):
            return 2

    assert _get_gradient_divide_factors(TwoRanks(), None, torch.float32) == (None, None, dist.ReduceOp.AVG,
                                                                              dist.ReduceOp.AVG)


@backs("notebooks/08_porting.ipynb", "拼参数在单独的流上做，用事件与计算流同步")
def test_fsdp2_gathers_on_its_own_stream_and_syncs_by_event():
    source = _fsdp_collectives_source()
    assert "with device_handle.stream(all_gather_stream):" in source
    assert "all_gather_event = all_gather_stream.record_event()" in source
    assert "device_handle.current_stream().wait_event(all_gather_event)" in source


@backs("notebooks/08_porting.ipynb", "torch 2.13 在 DDP 的 `forward` 里断图（一次日志调用），之后什么也不编译")
def test_compiling_ddp_compiles_nothing_but_ddp_of_a_compiled_module_splits_at_buckets():
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for wrap, want in ((lambda m, backend: torch.compile(DDP(m, bucket_cap_mb=1), backend=backend), 0),
                           (lambda m, backend: DDP(torch.compile(m, backend=backend), bucket_cap_mb=1), 2)):
            graphs = []
            torch._dynamo.reset()
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))  # 1 MiB each: one bucket each
            wrap(model, lambda gm, inputs: graphs.append(gm) or gm.forward)(torch.randn(2, 512))
            assert len(graphs) == want
    finally:
        dist.destroy_process_group()
        torch._dynamo.reset()


@backs("notebooks/08_porting.ipynb", "DDP 用到的集合通信是构造时的 `broadcast` 和 `all_gather`，以及训练时的 `all_reduce`（同步梯度）")
def test_ddp_broadcasts_and_gathers_when_built_and_only_all_reduces_when_training():
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("toyccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = DDP(nn.Linear(4, 2).to("toychip"))
        built = dict(dist.group.WORLD.calls)
        model(torch.randn(3, 4, device="toychip")).sum().backward()
        assert built.keys() == {"broadcast", "allgather"}
        assert dist.group.WORLD.calls.keys() - built.keys() == {"allreduce"}
    finally:
        dist.destroy_process_group()


# ---- profiler ----

@backs("notebooks/08_porting.ipynb", "`torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])` 向 PyTorch 的性能分析库 Kineto 要设备活动")
def test_the_wheel_has_kineto_and_a_privateuse1_profiler_activity():
    from torch.profiler import ProfilerActivity

    assert torch.autograd.kineto_available()
    assert ProfilerActivity.PrivateUse1 in torch.autograd._supported_activities()


@backs("notebooks/08_porting.ipynb", "`torch/csrc/profiler/standalone/privateuse1_profiler.h` 里的 `REGISTER_PRIVATEUSE1_PROFILER`")
def test_privateuse1_activity_profilers_register_with_a_macro_in_privateuse1_profiler_h():
    header = (TORCH_INCLUDE / "torch/csrc/profiler/standalone/privateuse1_profiler.h").read_text()
    assert "#define REGISTER_PRIVATEUSE1_PROFILER(ProfilerClass)" in header
    assert "std::is_base_of_v<libkineto::IActivityProfiler, ProfilerClass>" in header


@backs("notebooks/08_porting.ipynb", "每个 CPU 算子运行时把这个算子的**关联 id**（correlation id）推给它（`pushCorrelationId`）")
def test_kineto_activity_profilers_hand_out_sessions_that_take_correlation_ids():
    header = (TORCH_INCLUDE / "kineto/IActivityProfiler.h").read_text()
    assert "class IActivityProfiler {" in header and "class IActivityProfilerSession {" in header
    assert "virtual std::unique_ptr<IActivityProfilerSession> configure(" in header
    assert "virtual void pushCorrelationId(" in header


@backs("notebooks/08_porting.ipynb", "Kineto 的 `kLinkAsyncCpuGpu`")
def test_kineto_names_the_cpu_to_device_flow_link():
    assert "constexpr unsigned int kLinkAsyncCpuGpu" in (TORCH_INCLUDE / "kineto/GenericTraceActivity.h").read_text()


@backs("notebooks/08_porting.ipynb", "`key_averages()` 把这些时长按发起它们的 CPU 算子加起来")
def test_key_averages_adds_linked_device_events_to_the_cpu_op_that_launched_them():
    from torch.autograd.profiler import profile

    source = source_of(profile._parse_kineto_results)
    assert "linked_correlation_id()" in source
    assert "DeviceType.PrivateUse1" in source and "fe.append_kernel(" in source


# ---- streams ----

@backs("notebooks/08_porting.ipynb", "PyTorch 的 CUDA sanitizer（`torch/cuda/_sanitizer.py`，`TORCH_CUDA_SANITIZER=1` 打开）")
def test_the_cuda_sanitizer_is_turned_on_by_an_environment_variable_and_keeps_per_stream_clocks():
    import torch.cuda._sanitizer as sanitizer

    assert "exporting the ``TORCH_CUDA_SANITIZER`` environment variable" in " ".join(sanitizer.__doc__.split())
    synchronizations = sanitizer.StreamSynchronizations
    assert {"record_state", "stream_wait_for_event", "all_streams_wait_for_stream", "sync_all_streams",
            "update_seq_num"} <= set(dir(synchronizations))


@backs("notebooks/08_porting.ipynb", "`record_stream` 让分配器在释放时记下默认流上的工作")
def test_record_stream_keeps_memory_until_the_streams_work_queued_at_deallocation_is_done():
    doc = " ".join(torch.Tensor.record_stream.__doc__.split())
    assert ("ensure the tensor memory is not reused for another tensor until all work queued on :attr:`stream` "
            "at the time of deallocation is complete") in doc
    assert "The caching allocator is aware of only the stream where a tensor was allocated" in doc


# ---- fix1: the fresh reader's findings ----

@backs("notebooks/08_porting.ipynb", "带这个键的 YAML 会被拒绝（\"contains unexpected keys: extra_headers\"）")
def test_torch_2_13_torchgen_lists_extra_headers_but_rejects_it(tmp_path):
    text = "backend: PrivateUse1\ncpp_namespace: toychip\nextra_headers:\n  - a.h\nsupported:\n  - abs\n"
    assert "extra_headers" in torchgen_backend_keys()
    assert "contains unexpected keys: extra_headers" in models.torchgen_reads(write_yaml(tmp_path, text))
    assert registration.load_declaration(write_yaml(tmp_path, text)).supported == ("abs",)


@backs("notebooks/08_porting.ipynb", "C++ 的 `Backend` 的虚函数还是旧名字")
@backs("notebooks/08_porting.ipynb", "`ProcessGroup::all_gather_single` 经调度器的 `c10d::_allgather_base_` 算子转到设备的 `Backend`")
@backs("notebooks/08_porting.ipynb", "NCCL 的 `ProcessGroupNCCL.hpp` 覆盖 `_allgather_base`")
def test_only_process_group_has_the_2_13_names_backends_keep_the_old_ones():
    c10d = TORCH_INCLUDE / "torch" / "csrc" / "distributed" / "c10d"
    backend = (c10d / "Backend.hpp").read_text()
    for old in ("_allgather_base", "allgather_into_tensor_coalesced", "_reduce_scatter_base",
                "reduce_scatter_tensor_coalesced", "alltoall_base"):
        assert f"virtual c10::intrusive_ptr<Work> {old}(" in backend
    assert not any(new in backend for new in ("all_gather_single", "reduce_scatter_single", "all_to_all_single"))
    process_group = (c10d / "ProcessGroup.hpp").read_text()
    gather = process_group[process_group.index("virtual c10::intrusive_ptr<Work> all_gather_single("):]
    assert gather.index('findSchemaOrThrow("c10d::_allgather_base_"') < gather.index("virtual", 10)
    assert "c10::intrusive_ptr<Work> _allgather_base(" in (c10d / "ProcessGroupNCCL.hpp").read_text()


@backs("notebooks/08_porting.ipynb", "DDP 默认还在每次前向之前广播一次缓冲区（`_pre_forward` 里的 `_sync_buffers`；torch 2.13 用 `forward_sync_buffers` 开关它，旧参数 `broadcast_buffers` 已弃用）")
def test_ddp_broadcasts_a_modules_buffers_before_every_forward():
    from torch.nn.parallel import DistributedDataParallel as DDP

    assert inspect.signature(DDP).parameters["forward_sync_buffers"].default is None
    assert "`broadcast_buffers` is deprecated. Use `forward_sync_buffers`" in source_of(DDP.__init__)
    assert "self._sync_buffers()" in source_of(DDP._pre_forward)
    dist.init_process_group("toyccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = DDP(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).to("toychip"))
        assert model.forward_sync_buffers is True
        built = dist.group.WORLD.calls["broadcast"]
        model(torch.randn(3, 4, device="toychip"))
        assert dist.group.WORLD.calls["broadcast"] > built
    finally:
        dist.destroy_process_group()


@backs("notebooks/08_porting.ipynb", "`test_noncontiguous_samples` 在**同一个设备**上比较非连续和连续的输入")
@backs("notebooks/08_porting.ipynb", "`TestCommon.test_noncontiguous_samples`（同设备上非连续对连续）同样")
def test_pytorch_expects_as_strided_partial_views_to_fail_the_same_device_noncontiguous_test():
    import unittest

    from toychip import opinfo

    partial = next(op for op in opinfo.op_db() if opinfo.opinfo_name(op) == "as_strided.partial_views")
    assert any(d.cls_name == "TestCommon" and d.test_name == "test_noncontiguous_samples"
               and unittest.expectedFailure in d.decorators for d in partial.decorators if hasattr(d, "test_name"))


@backs("notebooks/08_porting.ipynb", "出错的样本只归一化一个元素，`x - mean` 精确为 0，所以权重的梯度精确为 0")
def test_layer_norm_over_one_element_has_an_exactly_zero_weight_gradient_the_cpu_rounds():
    x, weight = torch.tensor([-3.0904]), torch.tensor([0.6962], requires_grad=True)
    chip_weight = weight.detach().to("toychip").requires_grad_()
    (cpu_grad,) = torch.autograd.grad(torch.nn.functional.layer_norm(x, (1,), weight).sum(), weight)
    (chip_grad,) = torch.autograd.grad(torch.nn.functional.layer_norm(x.to("toychip"), (1,), chip_weight).sum(),
                                       chip_weight)
    assert chip_grad.cpu().item() == 0.0 and cpu_grad.abs().item() > 1e-5


# ---- fix2 ----

@backs("notebooks/08_porting.ipynb", "c10 把每个请求都按 512 字节取整（`kMinBlockSize`）")
def test_c10_rounds_requests_to_512_bytes_and_sizes_segments_in_2_mib():
    config = (TORCH_INCLUDE / "c10/core/AllocatorConfig.h").read_text()
    constants = dict(re.findall(r"constexpr size_t (k\w+) = (\d+);", config))
    assert constants["kMinBlockSize"] == "512"
    assert constants["kSmallSize"] == str(1 << 20) and constants["kSmallBuffer"] == str(2 << 20)
    assert constants["kMinLargeAlloc"] == str(10 << 20) and constants["kRoundLarge"] == str(2 << 20)
    assert "allocations between 1 and 10 MiB may use kLargeBuffer" in config


@backs("notebooks/08_porting.ipynb", "之后每次分配时查询这些事件是否已经完成（`process_events`），主机不必等")
def test_the_allocator_polls_recorded_streams_on_later_allocations():
    doc = " ".join(torch.Tensor.record_stream.__doc__.split())
    assert "on later allocations the allocator will poll the recorded stream to see if all operations have completed yet" in doc


@backs("notebooks/08_porting.ipynb", "CUDA sanitizer 看不出漏掉的 `record_stream`：张量一释放它就忘掉这块内存，`aten.record_stream` 也被它跳过")
def test_the_cuda_sanitizer_forgets_freed_memory_and_skips_record_stream():
    import torch.cuda._sanitizer as sanitizer

    deallocation = source_of(sanitizer.EventHandler._handle_memory_deallocation)
    assert "delete_tensor(data_ptr)" in deallocation
    assert "if func is aten.record_stream.default:\n            return func(*args, **kwargs)" in \
        source_of(sanitizer.CUDASanitizerDispatchMode.__torch_dispatch__)


@backs("notebooks/08_porting.ipynb", "CUDA sanitizer 只有一种模式，发现竞争就抛出 `CUDASanitizerErrors`")
def test_the_cuda_sanitizer_raises_its_errors():
    import torch.cuda._sanitizer as sanitizer

    assert "raise CUDASanitizerErrors(errors)" in source_of(sanitizer.CUDASanitizerDispatchMode.__torch_dispatch__)
    assert "warn" not in source_of(sanitizer.CUDASanitizer).lower()


@backs("notebooks/08_porting.ipynb", "主机的同步（`torch.accelerator.synchronize()`、`Stream.synchronize()`、`Event.synchronize()`）")
def test_the_cuda_sanitizer_follows_device_stream_and_event_synchronisation():
    import torch.cuda._sanitizer as sanitizer

    handlers = {"_handle_device_synchronization", "_handle_stream_synchronization", "_handle_event_synchronization"}
    assert handlers <= set(dir(sanitizer.EventHandler))


@backs("notebooks/08_porting.ipynb", "`pin_memory()` 本身就是一次锁页分配加一次主机上的拷贝")
def test_pin_memory_copies_the_tensor():
    assert "Copies the tensor to pinned memory" in torch.Tensor.pin_memory.__doc__


@backs("notebooks/08_porting.ipynb", "`num_workers > 0` 时在后台线程里做")
def test_data_loader_pins_in_a_thread_only_with_workers():
    from torch.utils.data import dataloader

    workers = source_of(dataloader._MultiProcessingDataLoaderIter)
    assert "threading.Thread" in workers and "_pin_memory_loop" in workers
    assert "threading" not in source_of(dataloader._SingleProcessDataLoaderIter)
