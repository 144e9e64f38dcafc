"""Facts about torch that chapter 04 (Lazy Tensor) relies on, one test each.

Most run on LTC's TorchScript backend, started once for the process as the chapter does.
The last block pins the sentences of section 5 to what ``assets/xla`` recorded of
torch_xla, which is not installed here.
"""
import contextlib
import importlib.util
import inspect
import logging
import re
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch._lazy
import torch._lazy.computation
import torch._lazy.config
import torch._lazy.debug
import torch._lazy.metrics
import torch.fx
import torch.nn as nn
from torch._lazy.extract_compiled_graph import extract_compiled_graph
from torch.utils._python_dispatch import TorchDispatchMode

from course_models.ch04_models import backend_interface_methods, init_ltc, lazy_dispatch_entry, run_program, xla_reference
from facts import backs

aten = torch.ops.aten
LAZY_INCLUDE = Path(torch.__file__).parent / "include" / "torch" / "csrc" / "lazy"

init_ltc()


def counters() -> dict:
    return {name: torch._lazy.metrics.counter_value(name) for name in torch._lazy.metrics.counter_names()}


def fresh():
    """Nothing pending, counters at zero."""
    torch._lazy.mark_step()
    torch._lazy.metrics.reset()


def seed_chain_on_lazy():
    x = torch.tensor([1.0, 2.0, 3.0], device="lazy")
    return (x + 1) * 2 - 0.5


def text_ir(*tensors) -> str:
    return torch._lazy.debug.dump_ir(list(tensors), "text")


def graph_hash(tensor) -> bytes:
    return torch._lazy.computation.get_graph_hash([tensor])


def fallback_counts(fn) -> dict:
    """``aten::*`` and ``lazy::*`` counters of one step running ``fn`` on a lazy 6×6."""
    v = torch.randn(6, 6).to("lazy")
    fresh()
    kept = fn(v)
    torch._lazy.mark_step()
    return {name: count for name, count in counters().items() if name.startswith(("aten::", "lazy::"))}


class RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []
        self.threads = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        self.threads.add(threading.get_ident())
        return func(*args, **(kwargs or {}))


class FakeTensorWarnings(logging.Handler):
    """Keeps the Dynamo attempt (``[0/0]`` is attempt 0, ``[0/0_1]`` attempt 1) of each fake-tensor warning."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.attempts = []

    def emit(self, record):
        if "meta converter nyi" in record.getMessage():
            self.attempts.append(torch._guards.CompileContext.current_trace_id().attempt)


def fake_tensor_warning_attempts(fn, *inputs) -> list:
    """Compile ``fn`` afresh, call it on ``inputs``, return the attempt of every warning it logged."""
    logger, handler = logging.getLogger("torch._dynamo.utils"), FakeTensorWarnings()
    torch._dynamo.reset()
    logger.addHandler(handler)
    try:
        torch.compile(fn, backend="eager")(*inputs)
    finally:
        logger.removeHandler(handler)
    return handler.attempts


@contextlib.contextmanager
def forced_fallback(op_name: str):
    torch._lazy.config.set_force_fallback(op_name)
    try:
        yield
    finally:
        torch._lazy.config.set_force_fallback("")


@contextlib.contextmanager
def symbolic_shapes(enabled: bool):
    before = torch._C._lazy._get_symbolic_shape_mode()
    torch._C._lazy._set_symbolic_shape_mode(enabled)
    try:
        yield
    finally:
        torch._C._lazy._set_symbolic_shape_mode(before)


def two_tuple_graph(fn) -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(fn)


def out_of_range_gather():
    x = torch.tensor([1.0, 2.0, 3.0], device="lazy")
    return torch.gather(x, 0, torch.tensor([5], device="lazy"))


def drain_stored_error():
    """Consume the execution error LTC keeps for the next sync, so later tests start clean."""
    with contextlib.suppress(RuntimeError):
        torch._lazy.mark_step()


# --- 0/1. the lazy device ------------------------------------------------------------------------

@backs("notebooks/04_lazy.ipynb", "PyTorch 2.13 自带 `torch._lazy` 和它的 TorchScript 后端")
def test_torch_2_13_ships_ltc_with_a_torchscript_backend_that_runs_on_cpu():
    import torch._lazy.ts_backend
    assert torch.__version__.startswith("2.13")
    assert seed_chain_on_lazy().cpu().tolist() == [3.5, 5.5, 7.5]
    assert torch._C._lazy._get_default_device_type() == "CPU"


@backs("notebooks/04_lazy.ipynb", "同一进程里只能启动一次")
def test_the_ts_backend_can_be_started_only_once_per_process():
    import torch._lazy.ts_backend
    with pytest.raises(RuntimeError, match="multiple backend fallbacks"):
        torch._lazy.ts_backend.init()


@backs("notebooks/04_lazy.ipynb", "打印**还没执行**的 IR")
def test_dump_ir_text_shows_the_pending_ir_without_executing_it():
    fresh()
    ir = text_ir(seed_chain_on_lazy())
    assert ir.startswith("IR {") and all(f"aten::{op}(" in ir for op in ("add", "mul", "sub"))
    assert torch._lazy.metrics.counter_value("UncachedCompile") is None


@backs("notebooks/04_lazy.ipynb", "LTC 把标量当作程序的**输入**而不是常量")
def test_scalars_and_alphas_of_the_seed_chain_become_device_data():
    ir = text_ir(seed_chain_on_lazy())
    data = re.findall(r"\[(\w+\[[\d,]*\])\] lazy_tensors::device_data\(\)", ir)
    assert sorted(data) == ["Double[]", "Float[3]", "Long[]", "Long[]", "Long[]", "Long[]"]


@backs("notebooks/04_lazy.ipynb", "`%5` 是 `x`")
def test_x_is_device_data_node_5_of_the_seed_chain():
    assert "%5 = [Float[3]] lazy_tensors::device_data()" in text_ir(seed_chain_on_lazy())


@backs("notebooks/04_lazy.ipynb", "方括号里是输出的 dtype 和形状")
def test_ir_lines_give_dtype_and_shape_in_brackets_and_mark_the_root():
    ir = text_ir(seed_chain_on_lazy())
    assert "= [Float[3]] aten::add(" in ir and "aten::sub(%7, %1, %0), ROOT=0" in ir


@backs("notebooks/04_lazy.ipynb", "之后 `w` 在 IR 里只剩一个 `device_data`")
def test_after_mark_step_the_result_is_one_device_data_node():
    w = seed_chain_on_lazy()
    torch._lazy.mark_step()
    assert text_ir(w).count("\n  %") == 1 and "lazy_tensors::device_data(), device=CPU0, ROOT=0" in text_ir(w)


@backs("notebooks/04_lazy.ipynb", "`UncachedCompile: 1` 表示编译了一张新图")
def test_mark_step_counts_the_step_and_compiles_new_graphs_once():
    v = torch.randn(7, 3).to("lazy")
    fresh()
    w = torch.cos(v) * 3
    torch._lazy.mark_step()
    first = counters()
    torch._lazy.metrics.reset()
    w = torch.cos(v) * 4
    torch._lazy.mark_step()
    assert (first["MarkStep"], first["UncachedCompile"], counters()["CachedCompile"]) == (1, 1, 1)


@backs("notebooks/04_lazy.ipynb", "直接 `print(w)` 也会触发执行")
def test_printing_a_pending_tensor_executes_its_graph():
    v = torch.randn(5, 3).to("lazy")
    fresh()
    str(torch.sin(v) - 7)
    assert counters()["UncachedCompile"] == 1


@backs("notebooks/04_lazy.ipynb", "LTC 的张量自带分发键 `Lazy`（以及 `AutogradLazy`、`Functionalize`）")
def test_lazy_tensors_carry_the_lazy_autograd_lazy_and_functionalize_keys():
    keys = torch._C._dispatch_keys(torch.ones(2, device="lazy"))
    assert all(keys.has(getattr(torch._C.DispatchKey, k)) for k in ("Lazy", "AutogradLazy", "Functionalize"))


@backs("notebooks/04_lazy.ipynb", "只有 C++ 版本，纯 Python 的芯片没法实现它")
def test_the_backend_interface_is_cpp_only():
    assert "class TORCH_API BackendImplInterface" in (LAZY_INCLUDE / "backend" / "backend_interface.h").read_text()
    for module in (torch._C._lazy, torch._C._lazy_ts_backend):
        assert not [n for n in dir(module) if isinstance(getattr(module, n), type)]


@backs("notebooks/04_lazy.ipynb", "前向和反向都有")
def test_a_dispatch_mode_sees_the_backward_aten_ops_too():
    x = torch.randn(4, requires_grad=True)
    with RecordOps() as mode:
        torch.relu(x).sum().backward()
    assert aten.relu.default in mode.ops and aten.threshold_backward.default in mode.ops


@backs("notebooks/04_lazy.ipynb", "`Python` 键出现在**线程局部**的包含集里")
def test_an_active_dispatch_mode_adds_python_to_the_thread_local_include_set():
    python = torch._C.DispatchKey.Python
    assert not torch._C._dispatch_tls_local_include_set().has(python)
    with RecordOps():
        assert torch._C._dispatch_tls_local_include_set().has(python)


@backs("notebooks/04_lazy.ipynb", "权重先是 `UninitializedParameter`")
def test_lazy_linear_defers_only_the_weight_shape():
    layer = nn.LazyLinear(4)
    assert isinstance(layer.weight, nn.parameter.UninitializedParameter)
    out = layer(torch.randn(2, 3))
    assert tuple(layer.weight.shape) == (4, 3) and not torch._C._dispatch_keys(out).has(torch._C.DispatchKey.Lazy)


@backs("notebooks/04_lazy.ipynb", "浮点数除以 0 在 PyTorch 里**根本不是错误**")
def test_dividing_by_zero_gives_inf_eager_and_lazy():
    eager = torch.tensor([1.0, -1.0]) / 0
    lazy = (torch.tensor([1.0, -1.0], device="lazy") / 0).cpu()
    assert eager.tolist() == lazy.tolist() == [float("inf"), float("-inf")]


@backs("notebooks/04_lazy.ipynb", "只取决于形状和 dtype 的错误（比如矩阵形状不匹配）在 LTC 里**立即**报出")
def test_shape_errors_are_raised_while_recording():
    fresh()
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.randn(3, 4, device="lazy") @ torch.randn(5, 6, device="lazy")
    assert torch._lazy.metrics.counter_value("UncachedCompile") is None


@backs("notebooks/04_lazy.ipynb", "`gather` 的下标越界，即时模式当场报错")
def test_an_out_of_range_gather_is_recorded_and_fails_only_when_executed():
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.gather(torch.tensor([1.0, 2.0, 3.0]), 0, torch.tensor([5]))
    fresh()
    picked = out_of_range_gather()
    assert "aten::gather" in text_ir(picked)
    with pytest.raises(RuntimeError, match="index 5 is out of bounds"):
        picked.item()
    del picked
    drain_stored_error()
    picked = out_of_range_gather()
    with pytest.raises(RuntimeError, match="index 5 is out of bounds"):
        picked.cpu()
    del picked
    drain_stored_error()


@backs("notebooks/04_lazy.ipynb", "紧接着那个已经无事可做的 `mark_step()` 又报了同样的错")
def test_a_failed_execution_is_raised_again_once_at_the_next_sync():
    fresh()
    picked = out_of_range_gather()
    with pytest.raises(RuntimeError):
        picked.item()
    del picked
    with pytest.raises(RuntimeError, match="index 5 is out of bounds"):
        torch._lazy.mark_step()
    torch._lazy.mark_step()


@backs("notebooks/04_lazy.ipynb", "`lazy_graph_executor.h` 里的 `DeviceLocker`")
def test_the_device_locker_keeps_an_exception_to_rethrow():
    header = (LAZY_INCLUDE / "core" / "lazy_graph_executor.h").read_text()
    locker = header.split("class DeviceLocker {")[1].split("};")[0]
    assert "std::exception_ptr exptr_;" in locker and "void CheckResetException();" in locker


@backs("notebooks/04_lazy.ipynb", "打印出来的全是 `run_program` 自己的算子")
def test_a_mode_over_run_program_on_meta_inputs_sees_only_its_four_ops():
    steps = [("matmul", 0), ("unary", "sigmoid", 1), ("unary", "relu", 1), ("add", 1, 3)]
    x_meta, w_meta = torch.randn(4, 4).to("meta"), torch.randn(4, 4).to("meta")
    with RecordOps() as mode:
        run_program(steps, x_meta, w_meta)
    assert mode.ops == [aten.mm.default, aten.sigmoid.default, aten.relu.default, aten.add.Tensor]


@backs("notebooks/04_lazy.ipynb", "只有形状和 dtype，没有数据")
def test_meta_tensors_have_shape_and_dtype_but_no_data():
    meta = torch.randn(4, 4).to("meta")
    assert meta.shape == (4, 4) and meta.dtype == torch.float32 and meta.untyped_storage().data_ptr() == 0


# --- 2. graph hash and cache --------------------------------------------------------------------

@backs("notebooks/04_lazy.ipynb", "不看张量里的数值；标量是 `device_data` 输入，所以也不影响")
def test_the_graph_hash_ignores_values_and_scalars():
    a, b = torch.randn(4, 4).to("lazy"), torch.randn(4, 4).to("lazy")
    fresh()
    assert graph_hash(torch.relu(a * 2)) == graph_hash(torch.relu(b * 2)) == graph_hash(torch.relu(a * 3))


@backs("notebooks/04_lazy.ipynb", "哈希只看图的**结构**——算子、形状、dtype")
def test_the_graph_hash_changes_with_op_shape_and_dtype():
    a, c = torch.randn(4, 4).to("lazy"), torch.randn(5, 4).to("lazy")
    d = torch.randn(4, 4, dtype=torch.float64).to("lazy")
    fresh()
    hashes = [graph_hash(t) for t in (torch.relu(a * 2), torch.relu(c * 2), torch.sigmoid(a * 2), torch.relu(d * 2))]
    assert len(set(hashes)) == 4


@backs("notebooks/04_lazy.ipynb", "只改学习率时，第一步编译（`UncachedCompile`），后两步命中缓存（`CachedCompile`）")
def test_a_new_learning_rate_hits_the_cache_and_a_new_batch_size_recompiles():
    def steps(schedule):
        w = torch.randn(4, 3).to("lazy")
        fresh()
        for lr, batch in schedule:
            x = torch.randn(batch, 4).to("lazy")
            w = w - lr * (x.t() @ torch.tanh(x @ w)) / batch
            torch._lazy.mark_step()
        return torch._lazy.metrics.counter_value("UncachedCompile"), torch._lazy.metrics.counter_value("CachedCompile")

    assert steps([(0.1, 9), (0.05, 9), (0.01, 9)]) == (1, 2)
    assert steps([(0.1, 33), (0.1, 17), (0.1, 5)]) == (3, None)


@backs("notebooks/04_lazy.ipynb", "`counter_value` 对从未出现的计数器返回 `None`")
def test_counter_value_of_an_unseen_counter_is_none():
    torch._lazy.metrics.reset()
    assert torch._lazy.metrics.counter_value("CachedCompile") is None


@backs("notebooks/04_lazy.ipynb", "LTC 把 `x + 2` 的 `2` 也变成 `device_data`")
def test_an_int_operand_is_device_data_but_a_dimension_is_part_of_the_node():
    a = torch.randn(4, 4).to("lazy")
    fresh()
    assert text_ir(a + 2).count("[Long[]] lazy_tensors::device_data()") == 2  # the 2 and alpha=1
    summed = text_ir(a.sum(1))
    assert "lazy_tensors::device_data" in summed and "Long[]" not in summed and "dim=1" in summed


@backs("notebooks/04_lazy.ipynb", "LTC 默认不用线程池调度执行")
@backs("notebooks/04_lazy.ipynb", "图就在调用 `mark_step()` 的线程上算完")
def test_mark_step_runs_the_graph_on_the_calling_thread_before_it_returns():
    a = torch.randn(16, 16).to("lazy")
    fresh()
    product = torch.relu(a @ a)
    with RecordOps() as mode:
        torch._lazy.mark_step()
    assert mode.ops == [aten.mm.default, aten.relu.default] and mode.threads == {threading.get_ident()}


@backs("notebooks/04_lazy.ipynb", "C++ 标志 `torch_lazy_use_thread_pool` 默认关闭，声明在 `torch/csrc/lazy/core/config.h`")
def test_the_thread_pool_flag_is_declared_in_ltc_config_h():
    """The default itself is in config.cpp, not installed: the test above checks what it does."""
    assert "TORCH_DECLARE_bool(torch_lazy_use_thread_pool);" in (LAZY_INCLUDE / "core" / "config.h").read_text()


@backs("notebooks/04_lazy.ipynb", "`wait=True` 只等主机一侧的执行，不同步加速器")
def test_mark_step_wait_waits_for_the_host_side_only():
    assert inspect.signature(torch._lazy.mark_step).parameters["wait"].default is False
    assert "waiting for cpu-side execution to complete (does not sync the accelerator)" in torch._lazy.mark_step.__doc__


# --- 3. barriers ----------------------------------------------------------------------------------

@backs("notebooks/04_lazy.ipynb", "`aten::` 开头的计数器是**回退**到即时 CPU 执行的算子")
def test_fallbacks_are_counted_under_aten_names():
    assert fallback_counts(lambda v: torch.linalg.det(v) * v).get("aten::_linalg_det") == 1


@backs("notebooks/04_lazy.ipynb", "`.item()` 表现为 `aten::_local_scalar_dense` 回退，布尔掩码表现为 `aten::index.Tensor` 回退")
def test_item_and_boolean_masks_show_up_as_fallbacks():
    assert fallback_counts(lambda v: v * v.sum().item()).get("aten::_local_scalar_dense") == 1
    assert fallback_counts(lambda v: v[v > 0]).get("aten::index.Tensor") == 1


@backs("notebooks/04_lazy.ipynb", "**输出形状取决于数值的算子**（`nonzero`、`x[x > 0]`、`unique`）")
def test_nonzero_boolean_masks_and_unique_have_data_dependent_output_shapes():
    for op in (aten.nonzero.default, aten.index.Tensor, aten._unique2.default):
        assert torch.Tag.dynamic_output_shape in op.tags
    with RecordOps() as mode:
        x = torch.randn(4)
        x[x > 0], torch.unique(x)
    assert aten.index.Tensor in mode.ops and aten._unique2.default in mode.ops


@backs("notebooks/04_lazy.ipynb", "打印发生在所有 dispatch 模式之外")
def test_printing_a_tensor_is_invisible_to_dispatch_modes():
    t = torch.randn(3)
    with RecordOps() as mode:
        str(t)
    assert mode.ops == []


# --- 4. backends, lowering, fallback --------------------------------------------------------------

@backs("notebooks/04_lazy.ipynb", "上层（`LazyTensor`、IR 节点、形状推导、图哈希、缓存、`LazyGraphExecutor`）对所有后端通用")
def test_the_backend_independent_layer_is_lazy_core():
    core = LAZY_INCLUDE / "core"
    declared = {"tensor.h": "class TORCH_API LazyTensor", "ir.h": "class TORCH_API Node",
                "shape_inference.h": "compute_shape_", "hash.h": "hash_t", "cache.h": "class Cache",
                "lazy_graph_executor.h": "class TORCH_API LazyGraphExecutor"}
    assert all(text in (core / header).read_text() for header, text in declared.items())


@backs("notebooks/04_lazy.ipynb", "同一张 IR 降低（lower）成了 TorchScript")
def test_the_backend_dump_is_the_torchscript_graph():
    dump = torch._lazy.debug.dump_ir([seed_chain_on_lazy()], "backend")
    assert dump.startswith("graph(%p0 : Tensor") and "aten::add" in dump and "return (" in dump


@backs("notebooks/04_lazy.ipynb", "按一步里用到的先后顺序，主要的方法是")
def test_the_interface_has_the_methods_the_chapter_tables():
    methods = {name for names in backend_interface_methods().values() for name in names}
    named = {"MakeComputationDataFromTensor", "MakeComputationDataFromScalar", "CreateLoweringContext", "Compile",
             "CreateDataPlaceholder", "ExecuteComputation", "MakeTensorFromComputationData", "GetDefaultDeviceType",
             "GetBackendDevice", "EagerFallbackDeviceType", "GetComputationBackendText"}
    assert named <= methods


@backs("notebooks/04_lazy.ipynb", "按头文件自己的分节列出")
def test_the_interface_header_groups_its_methods_in_sections():
    sections = backend_interface_methods()
    assert "Lowering, Compilation, Execution" in sections and "Data Transfer" in sections
    assert sections["Lowering, Compilation, Execution"][-2:] == ["Compile", "ExecuteComputation"]


@backs("notebooks/04_lazy.ipynb", "上面打印的 `CPU`")
def test_the_ts_backend_default_device_type_is_cpu():
    assert torch._C._lazy._get_default_device_type() == "CPU"


@backs("notebooks/04_lazy.ipynb", "`TSComputation` 持有一个 TorchScript 的 `GraphExecutor`")
def test_ts_computations_hold_a_graph_executor_and_ts_data_wraps_a_tensor():
    lowering = (LAZY_INCLUDE / "ts_backend" / "ts_lowering_context.h").read_text()
    assert "class TORCH_API TSComputation : public Computation" in lowering
    assert "torch::jit::GraphExecutor& graph_executor()" in lowering
    assert "class TORCH_API TSLoweringContext : public LoweringContext" in lowering
    impl = (LAZY_INCLUDE / "ts_backend" / "ts_backend_impl.h").read_text()
    assert "class TORCH_API TSData : public torch::lazy::BackendData" in impl and "at::Tensor data_;" in impl


@backs("notebooks/04_lazy.ipynb", "在这一栏登记了两样东西")
def test_init_registers_generated_lazy_kernels_and_a_backend_fallback():
    assert lazy_dispatch_entry("aten::relu") == ("kernel", "RegisterLazy.cpp")
    assert lazy_dispatch_entry("aten::_linalg_det") == ("backend fallback", "ts_eager_fallback.cpp")


@backs("notebooks/04_lazy.ipynb", "节点类带着把自己降低成 TorchScript 的 `Lower` 方法")
def test_generated_ir_nodes_are_ts_nodes_that_lower_themselves():
    assert "class Relu : public TsNode" in (LAZY_INCLUDE / "generated" / "LazyIr.h").read_text()
    assert re.search(r"virtual TSOpVector Lower\(", (LAZY_INCLUDE / "ts_backend" / "ts_node.h").read_text())


@backs("notebooks/04_lazy.ipynb", "`relu`、`gather` 都是")
def test_relu_and_gather_have_lazy_kernels():
    assert lazy_dispatch_entry("aten::relu")[0] == lazy_dispatch_entry("aten::gather")[0] == "kernel"


@backs("notebooks/04_lazy.ipynb", "`torch.linalg.det` 调用的 `linalg_det` 就被拆成了 `_linalg_det`")
def test_linalg_det_is_a_composite_that_calls_underscore_linalg_det():
    assert lazy_dispatch_entry("aten::linalg_det")[0] == "math kernel"
    with RecordOps() as mode:
        torch.linalg.det(torch.randn(3, 3))
    assert aten._linalg_det.default in mode.ops and aten.linalg_det.default not in mode.ops


@backs("notebooks/04_lazy.ipynb", "`_linalg_det` 和 `.item()` 背后的 `_local_scalar_dense` 都是这样")
def test_underscore_linalg_det_and_local_scalar_dense_fall_back():
    for op in ("aten::_linalg_det", "aten::_local_scalar_dense"):
        assert lazy_dispatch_entry(op) == ("backend fallback", "ts_eager_fallback.cpp")


@backs("notebooks/04_lazy.ipynb", "在没有打开符号形状（symbolic shape）模式时总是回退")
def test_nonzero_has_a_lazy_kernel_but_falls_back_without_symbolic_shapes():
    assert lazy_dispatch_entry("aten::nonzero")[0] == "kernel"
    assert torch._C._lazy._get_symbolic_shape_mode() is False
    assert "aten::nonzero" in fallback_counts(lambda v: torch.nonzero(v > 0))
    with symbolic_shapes(True):
        counts = fallback_counts(lambda v: torch.nonzero(v > 0))
    assert "lazy::nonzero" in counts and "aten::nonzero" not in counts


@backs("notebooks/04_lazy.ipynb", "`torch._lazy.config.set_force_fallback(\"aten::relu\")` 可以故意让一个算子回退")
def test_force_fallback_sends_an_op_with_a_lazy_kernel_to_the_fallback():
    assert fallback_counts(torch.relu).get("lazy::relu") == 1
    with forced_fallback("aten::relu"):
        counts = fallback_counts(torch.relu)
    assert counts.get("aten::relu") == 1 and "lazy::relu" not in counts


@backs("notebooks/04_lazy.ipynb", "有 Lazy 内核、被记录进图的算子记在 `lazy::<算子名>` 上")
def test_traced_ops_are_counted_under_lazy_names():
    counts = fallback_counts(lambda v: torch.relu(v @ v))
    assert counts.get("lazy::mm") == 1 and counts.get("lazy::relu") == 1


@backs("notebooks/04_lazy.ipynb", "LTC 先执行待定的图拿到输入的值")
def test_a_fallback_first_executes_the_pending_graph_of_its_inputs():
    v = torch.randn(4, 4).to("lazy")
    fresh()
    torch.linalg.det(v * 2)
    assert counters().get("UncachedCompile") == 1 and counters().get("MarkStep") is None


@backs("notebooks/04_lazy.ipynb", "再把结果包成新的 `device_data`")
def test_a_fallback_result_is_new_device_data():
    v = torch.randn(4, 4).to("lazy")
    fresh()
    determinant = torch.linalg.det(v * 2)
    assert text_ir(determinant).count("\n  %") == 1 and "lazy_tensors::device_data(), device=CPU0, ROOT=0" in text_ir(
        determinant)


# --- 5. XLA and the Dynamo bridge -----------------------------------------------------------------

@backs("notebooks/04_lazy.ipynb", "本课程的环境里没有装它")
def test_torch_xla_is_not_installed_here():
    assert importlib.util.find_spec("torch_xla") is None


@backs("notebooks/04_lazy.ipynb", "`openxla` 出现在 `torch.compiler.list_backends()` 里，但真正调用时才去导入 `torch_xla`")
def test_openxla_is_listed_and_imports_torch_xla_only_when_called():
    from torch._dynamo.backends.torchxla import xla_backend_helper
    assert "openxla" in torch.compiler.list_backends() and "torch_xla" not in sys.modules
    with pytest.raises(ImportError, match="torch_xla"):
        xla_backend_helper(torch.fx.symbolic_trace(lambda t: t + 1), [torch.randn(2)])


@backs("notebooks/04_lazy.ipynb", "把 `openxla` 注册成 `aot_autograd(fw_compiler=...)`")
def test_openxla_is_aot_autograd_around_torch_xla_dynamo_bridge():
    from torch._dynamo.backends import torchxla
    from torch._dynamo.backends.common import AotAutograd
    assert isinstance(torchxla.openxla, AotAutograd)
    assert torchxla.openxla.kwargs["fw_compiler"] is torchxla.openxla_eval_boxed
    helper = inspect.getsource(torchxla.xla_backend_helper)
    imports_the_bridge = helper.index("import torch_xla.core.dynamo_bridge as bridge")
    forward = helper.index("def fwd(")
    assert imports_the_bridge < forward < helper.index("bridge.extract_compiled_graph(model, args)")


@backs("notebooks/04_lazy.ipynb", "this part is TS backend specific")
def test_torch_extract_compiled_graph_is_the_ts_backend_version_and_openxla_does_not_use_it():
    from torch._dynamo.backends import torchxla
    source = inspect.getsource(sys.modules[extract_compiled_graph.__module__])
    assert "this part is TS backend specific" in source and "get_tensors_ts_device_data_node" in source
    assert "torch._lazy" not in inspect.getsource(torchxla)


@backs("notebooks/04_lazy.ipynb", "拒绝含回退算子的图")
def test_extract_compiled_graph_rejects_graphs_with_fallbacks():
    gm = two_tuple_graph(lambda x: (torch.linalg.det(x) * x,))
    with pytest.raises(RuntimeError, match="because of fallback: aten::_linalg_det=1"):
        extract_compiled_graph(gm, [torch.randn(3, 3)])


def add_one_in_place(x):
    x.add_(1)
    return (x * 2,)


@backs("notebooks/04_lazy.ipynb", "把被原地修改的参数写回去")
def test_extract_compiled_graph_writes_in_place_updates_back_to_the_arguments():
    compiled = extract_compiled_graph(two_tuple_graph(add_one_in_place), [torch.zeros(3)])
    argument = torch.zeros(3)
    (doubled,) = compiled(argument)
    assert argument.tolist() == [1.0, 1.0, 1.0] and doubled.tolist() == [2.0, 2.0, 2.0]


@backs("notebooks/04_lazy.ipynb", "`extract_compiled_graph` 在追踪之后重置了计数器")
def test_extract_compiled_graph_resets_the_counters_after_tracing():
    torch._lazy.metrics.reset()
    extract_compiled_graph(two_tuple_graph(lambda p, q: (torch.relu(p @ q),)), [torch.randn(3, 3), torch.randn(3, 3)])
    assert not [name for name in counters() if name.startswith("lazy::")]


def traced_small_net():
    """What a replay backend does when Dynamo calls it: inputs to lazy, run once."""
    p, q = torch.randn(8, 8), torch.randn(8, 8)
    lazy_p, lazy_q = p.to("lazy"), q.to("lazy")
    out = torch.relu(lazy_p @ lazy_q + 1.0) * 2.0
    return (lazy_p, lazy_q), out


@backs("notebooks/04_lazy.ipynb", "`lazy::_to_copy` 是 2")
def test_tracing_small_net_counts_two_input_copies_and_each_op_once():
    fresh()
    traced_small_net()
    traced = {name: count for name, count in counters().items() if name.startswith("lazy::")}
    assert traced == {"lazy::_to_copy": 2, "lazy::mm": 1, "lazy::add": 1, "lazy::relu": 1, "lazy::mul": 1}


def cached_small_net():
    """The replay recipe of the chapter's exercise: graph hash, inputs by tensor id, compiled once."""
    (lazy_p, lazy_q), out = traced_small_net()
    position = {torch._lazy.get_tensor_id(lazy_p): 0, torch._lazy.get_tensor_id(lazy_q): 1}
    ids, values = torch._lazy.computation.get_tensors_ts_device_data_node([out])
    graph = torch._lazy.computation.get_graph_hash([out])
    torch._lazy.sync_multi([out], [])

    def replay(p, q):
        inputs = [(p, q)[position[i]] if i in position else value for i, value in zip(ids, values)]
        return torch._lazy.computation.run_cached_graph(graph, inputs)
    return replay


@backs("notebooks/04_lazy.ipynb", "它不改变任何计数器")
def test_run_cached_graph_changes_no_counter():
    replay = cached_small_net()
    torch._lazy.metrics.reset()
    replay(torch.randn(8, 8), torch.randn(8, 8))
    assert counters() == {}


@backs("notebooks/04_lazy.ipynb", "返回它给出的 CPU 张量列表")
def test_run_cached_graph_returns_a_list_of_cpu_tensors():
    p, q = torch.randn(8, 8), torch.randn(8, 8)
    result = cached_small_net()(p, q)
    assert isinstance(result, list) and [t.device.type for t in result] == ["cpu"]
    assert torch.allclose(result[0], torch.relu(p @ q + 1.0) * 2.0, atol=1e-5)


@backs("notebooks/04_lazy.ipynb", "两种后端都只编译了一次（`UncachedCompile: 1`），也没有一次 `CachedCompile`")
def test_replaying_by_hash_compiles_once_and_never_looks_up_the_cache():
    torch._dynamo.reset()
    compiled = torch.compile(lambda p, q: torch.relu(p @ q + 1.0) * 2.0, backend=extract_compiled_graph)
    q = torch.randn(8, 8)
    torch._lazy.metrics.reset()
    for p in torch.randn(3, 8, 8):
        compiled(p, q)
    assert (counters().get("UncachedCompile"), counters().get("CachedCompile")) == (1, None)


@backs("notebooks/04_lazy.ipynb", "后端根本不会被调用，函数退回即时执行")
def test_lazy_inputs_make_dynamo_run_the_function_eagerly_without_the_backend():
    calls = []
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: torch.relu(t) * 2, backend=lambda gm, inputs: calls.append(gm) or gm.forward)
    out = compiled(torch.randn(4).to("lazy"))
    assert calls == [] and out.device.type == "lazy"


def small_net(p, q):
    return torch.relu(p @ q + 1.0) * 2.0


@backs("notebooks/04_lazy.ipynb", "日志里只留下上面那一条警告")
def test_lazy_inputs_to_small_net_log_the_fake_tensor_warning_once():
    assert fake_tensor_warning_attempts(small_net, torch.randn(8, 8).to("lazy"), torch.randn(8, 8).to("lazy")) == [0]


@backs("notebooks/04_lazy.ipynb", "同样的警告可能打两次")
def test_a_lazy_input_first_used_in_a_call_logs_the_warning_on_two_attempts():
    assert fake_tensor_warning_attempts(lambda t: torch.relu(t) * 2, torch.randn(4).to("lazy")) == [0, 1]


@backs("notebooks/04_lazy.ipynb", "本机 LTC 的 `torch._lazy.metrics.metrics_report()` 里没有这两项")
def test_ltc_metrics_report_has_no_compile_or_execute_time():
    v = torch.randn(6, 6).to("lazy")
    fresh()
    kept = torch.relu(v * 5)
    torch._lazy.mark_step()
    report = torch._lazy.metrics.metrics_report()
    assert "UncachedCompile" in report and "CompileTime" not in report and "ExecuteTime" not in report


# --- 5. what assets/xla recorded of torch_xla ------------------------------------------------------

@backs("notebooks/04_lazy.ipynb", "`p2` 是 `x`（`f32[3]`），`p1` 是标量 `2`，`p0` 是 `0.5`")
def test_recorded_hlo_takes_x_and_the_scalars_2_and_half_as_parameters():
    hlo = xla_reference()["seed_chain"]["hlo_text"]
    assert "(p0.2: f32[], p1.3: f32[], p2.6: f32[3])" in hlo
    assert "multiply(f32[3]{0} %add.9, f32[3]{0} %broadcast.10)" in hlo and "broadcast(f32[] %p1.3)" in hlo


@backs("notebooks/04_lazy.ipynb", "`x + 1` 的 `1` 和两个 `alpha=1` 在这里是 `constant(1)`")
def test_recorded_hlo_keeps_the_ones_as_constants():
    record = xla_reference()["seed_chain"]
    assert record["hlo_text"].count("constant(1)") == 3 and record["ir_text"].count("prim::Constant()") == 3


@backs("notebooks/04_lazy.ipynb", "三个逐元素运算被合进了一个 `fusion`（`kind=kLoop`）")
def test_recorded_optimized_hlo_fuses_the_chain_into_one_loop_fusion():
    optimized = xla_reference()["seed_chain"]["optimized_hlo_text"]
    entry = optimized.split("ENTRY")[1]
    assert entry.count("fusion(") == 1 and "kind=kLoop" in entry and "add(" not in entry


@backs("notebooks/04_lazy.ipynb", "越界的 `gather` 在 XLA 上没有报错，返回了 `3.0`")
def test_recorded_out_of_range_gather_returns_the_last_element():
    record = xla_reference()["out_of_range_gather"]
    assert (record["result"], record["error"]) == (3.0, None)


@backs("notebooks/04_lazy.ipynb", "计数器的名字和本机 LTC 上一样是 `aten::_linalg_det`")
def test_recorded_det_falls_back_under_the_same_counter_name():
    assert xla_reference()["det_fallback"]["counters"] == {"aten::_linalg_det": 1}


@backs("notebooks/04_lazy.ipynb", "`torch_xla.debug.metrics`（`CompileTime`、`ExecuteTime`、`aten::*`）")
def test_recorded_metrics_include_compile_and_execute_time():
    assert {"CompileTime", "ExecuteTime"} <= set(xla_reference()["det_fallback"]["metric_names"])


@backs("notebooks/04_lazy.ipynb", "旧写法 `xm.xla_device()`、`xm.mark_step()` 仍能用，但会发出警告")
def test_recorded_older_spellings_warn_towards_device_and_sync():
    assert xla_reference()["older_spellings"] == {"xm.xla_device()": ["Use torch_xla.device instead"],
                                                 "xm.mark_step()": ["Use torch_xla.sync instead"]}
