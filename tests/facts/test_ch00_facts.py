"""Facts about torch that chapter 00 (the comparison guide) relies on, one test each."""
import importlib.metadata
import importlib.util
import inspect
import io
import logging
import os
import tempfile
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from functorch.compile import make_boxed_func
from torch._dynamo.backends import registry
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.utils import counters
from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir
from torch._inductor.utils import run_and_get_code
from torch.export import Dim
from torch.fx.experimental.proxy_tensor import make_fx

from course_models.ch00_models import Classifier, GatedPair, MyModel, PointwiseChain
from course_models.ch01_models import gpu_reference, seed_chain
from facts import backs

TORCH = Path(torch.__file__).parent


def aten_calls(fn, *args) -> list[str]:
    return [str(n.target) for n in make_fx(fn)(*args).graph.nodes if n.op == "call_function"]


def recording_backend(graphs: list):
    """An AOTAutograd backend that notes each forward and backward graph's ATen calls."""
    def compiler(kind):
        def compile_graph(gm, example_inputs):
            graphs.append((kind, [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]))
            return make_boxed_func(gm.forward)
        return compile_graph
    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"))


def quietly(make, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make(*args)


SEEN = []


class Spy(nn.Module):
    """Chapter 00's section 1.1 module: its forward notes in a global list who runs it, with what."""

    def forward(self, x):
        SEEN.append(type(x).__name__)
        return x.relu() * 2


class ValueBranch(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


# --- section 1: the stack -----------------------------------------------------------------

@backs("notebooks/00_guide.ipynb", "PEP 523 帧求值接口")
def test_dynamo_hooks_python_frame_evaluation():
    assert hasattr(torch._C._dynamo.eval_frame, "set_eval_frame")


@backs("notebooks/00_guide.ipynb", "后端（默认 TorchInductor，在 CPU 上生成 C++/OpenMP 代码，在 GPU 上生成 Triton）")
def test_default_backend_is_inductor_with_cpp_on_cpu_and_triton_on_gpu():
    from torch._inductor import config
    assert registry.get_default_backend() == "inductor"
    assert inspect.signature(torch.compile).parameters["backend"].default is None
    assert (config.cpu_backend, config.cuda_backend) == ("cpp", "triton")


@backs("notebooks/00_guide.ipynb", "在 2.13 中它**默认不用 Dynamo**")
@backs("lib/course_models/ch00_models.py", "默认 strict=False")
def test_export_is_non_strict_by_default():
    assert inspect.signature(torch.export.export).parameters["strict"].default is False


@backs("notebooks/00_guide.ipynb", "`x` 是一个 `FakeTensor`")
def test_non_strict_export_runs_forward_in_python_on_fake_tensors_without_dynamo():
    SEEN.clear()
    counters.clear()
    torch.export.export(Spy(), (torch.randn(4),))
    assert SEEN == ["FakeTensor"] and dict(counters["stats"]) == {}


@backs("notebooks/00_guide.ipynb", "Dynamo 捕获了调用（`unique_graphs` = 1），并警告模型里有副作用")
def test_strict_export_captures_with_dynamo_and_warns_about_side_effects():
    SEEN.clear()
    counters.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.export.export(Spy(), (torch.randn(4),), strict=True)
    assert SEEN == [] and counters["stats"]["unique_graphs"] == 1
    assert any("side effects" in str(w.message) for w in caught)


@backs("notebooks/00_guide.ipynb", "不允许图中断 (graph break)")
def test_export_refuses_what_dynamo_would_break_the_graph_on():
    with pytest.raises(Exception, match="data-dependent"):
        torch.export.export(ValueBranch(), (torch.randn(3),))


@backs("notebooks/00_guide.ipynb", "默认隐藏带 `debug` 或 `experimental` 标签的后端")
def test_list_backends_hides_debug_and_experimental_backends():
    assert inspect.signature(torch.compiler.list_backends).parameters["exclude_tags"].default == ("debug", "experimental")


@backs("notebooks/00_guide.ipynb", "`ts` 只是一个带 `debug` 标签的调试后端，在 2.13 里用它编译会报错")
def test_the_ts_backend_is_a_debug_backend_that_fails():
    assert "ts" not in torch.compiler.list_backends() and "ts" in torch.compiler.list_backends(exclude_tags=())
    assert "debug" in registry._COMPILER_FNS["ts"]._tags
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed):
        quietly(torch.compile(MyModel(), backend="ts"), torch.randn(2, 100))


@backs("notebooks/00_guide.ipynb", "通过入口点组 `torch_dynamo_backends` 登记的")
def test_torch_discovers_compile_backends_in_the_torch_dynamo_backends_entry_points():
    assert '"torch_dynamo_backends"' in inspect.getsource(registry._discover_entrypoint_backends)
    assert "toychip" in importlib.metadata.entry_points(group="torch_dynamo_backends").names
    assert "toychip" in torch.compiler.list_backends()


@backs("notebooks/00_guide.ipynb", "后端 `openxla`（下面的列表里有它）把 Dynamo 捕获、AOTAutograd 分解后的图交给 torch_xla 编译")
@backs("notebooks/00_guide.ipynb", "`torch.compile` 的 `openxla` 后端也经由它")
def test_the_openxla_backend_hands_aot_autograd_graphs_to_torch_xla():
    from torch._dynamo.backends import torchxla
    assert "openxla" in torch.compiler.list_backends()
    assert registry.lookup_backend("openxla") is torchxla.openxla
    assert isinstance(torchxla.openxla, torch._dynamo.backends.common.AotAutograd)
    assert "torch_xla.core.dynamo_bridge" in inspect.getsource(torchxla.xla_backend_helper)


# --- section 2: the technologies ----------------------------------------------------------

@backs("notebooks/00_guide.ipynb", "只在需要梯度时生成反向图")
def test_aot_autograd_makes_a_backward_graph_only_when_gradients_are_needed():
    graphs = []
    torch._dynamo.reset()
    compiled = torch.compile(nn.Linear(3, 3), backend=recording_backend(graphs))
    with torch.no_grad():
        compiled(torch.randn(2, 3))
    assert [kind for kind, _ in graphs] == ["forward"]
    torch._dynamo.reset()
    graphs.clear()
    torch.compile(nn.Linear(3, 3), backend=recording_backend(graphs))(torch.randn(2, 3)).sum().backward()
    assert [kind for kind, _ in graphs] == ["forward", "backward"]


@backs("notebooks/00_guide.ipynb", "符号追踪不支持依赖数值的控制流")
def test_symbolic_trace_rejects_value_dependent_control_flow():
    with pytest.raises(torch.fx.proxy.TraceError):
        torch.fx.symbolic_trace(ValueBranch())


@backs("notebooks/00_guide.ipynb", "能在 C++ 里 `torch::jit::load`")
def test_torchscript_has_a_cpp_loader():
    header = TORCH / "include/torch/csrc/jit/serialization/import.h"
    assert "TORCH_API Module load(" in header.read_text(encoding="utf-8")


@backs("notebooks/00_guide.ipynb", "每次调用都会发出 `DeprecationWarning`")
def test_jit_script_and_trace_still_run_and_warn_deprecation():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scripted = torch.jit.script(MyModel())
        traced = torch.jit.trace(MyModel(), (torch.randn(2, 100),))
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any("`torch.jit.script` is deprecated" in m for m in messages)
    assert any("`torch.jit.trace` is deprecated" in m for m in messages)
    assert scripted(torch.randn(2, 100)).shape == traced(torch.randn(2, 100)).shape == (2, 10)


@backs("notebooks/00_guide.ipynb", "普通的 `python` 和 Jupyter 默认会隐藏这类警告")
def test_the_jit_deprecation_warning_is_attributed_to_torch_not_to_the_caller():
    """Python and IPython show DeprecationWarning only when it is attributed to ``__main__``;
    torch warns with the default stacklevel, so the warning belongs to torch's own module."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.jit.script(MyModel())
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert deprecations and all(Path(w.filename).is_relative_to(TORCH) for w in deprecations)


@backs("notebooks/00_guide.ipynb", "核对时又调用了一次 `trace_module`，所以是两条")
def test_tracing_a_module_warns_once_as_trace_and_twice_as_trace_method():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.jit.trace(MyModel(), (torch.randn(32, 100),))
    names = [str(w.message).split("`")[1] for w in caught if issubclass(w.category, DeprecationWarning)]
    assert names == ["torch.jit.trace", "torch.jit.trace_method", "torch.jit.trace_method"]
    assert inspect.signature(torch.jit.trace).parameters["check_trace"].default is True


@backs("notebooks/00_guide.ipynb", "编译后的包装对象无法再被脚本化")
@backs("notebooks/00_guide.ipynb", "`torch.jit.script(torch.compile(m))` 根本行不通")
def test_a_compiled_module_cannot_be_scripted():
    with pytest.raises(Exception):
        quietly(torch.jit.script, torch.compile(MyModel()))


# --- section 2.2: export, AOTInductor, ONNX -----------------------------------------------

@backs("notebooks/00_guide.ipynb", "权重作为输入列在签名 (graph signature) 里")
def test_exported_weights_are_inputs_of_the_graph_signature():
    exported = torch.export.export(MyModel().eval(), (torch.randn(32, 100),))
    kinds = [spec.kind.name for spec in exported.graph_signature.input_specs]
    assert kinds == ["PARAMETER"] * 4 + ["USER_INPUT"]


@backs("notebooks/00_guide.ipynb", "声明了第 0 维（batch）是一个符号 `s…`")
def test_a_declared_dynamic_batch_is_a_symbol_named_s():
    exported = torch.export.export(MyModel().eval(), (torch.randn(32, 100),), dynamic_shapes=({0: Dim("batch")},))
    assert [str(symbol)[0] for symbol in exported.range_constraints] == ["s"]


@backs("notebooks/00_guide.ipynb", "不声明的话，batch 会被固化成示例里的 32")
@backs("notebooks/00_guide.ipynb", "运行其他大小时守卫失败")
def test_without_dynamic_shapes_the_example_batch_is_guarded():
    exported = torch.export.export(MyModel().eval(), (torch.randn(32, 100),))
    with pytest.raises(AssertionError, match="Guard failed"):
        exported.module()(torch.randn(7, 100))


@backs("notebooks/00_guide.ipynb", "声明了动态 `Dim` 的导出直接报错 `Constraints violated (batch)!`")
@backs("notebooks/00_guide.ipynb", "所以 `torch.export` 不会悄悄特化，而是直接报错")
def test_a_batch_one_example_with_a_declared_dim_is_an_error():
    with pytest.raises(torch._dynamo.exc.UserError, match="(?s)Constraints violated \\(batch\\)!.*specialized it to be a constant \\(1\\)"):
        torch.export.export(MyModel().eval(), (torch.randn(1, 100),), dynamic_shapes=({0: Dim("batch")},))


@backs("notebooks/00_guide.ipynb", "声明为动态的 batch，导出后的程序在运行时取 1 也可以")
def test_a_dynamic_batch_runs_at_one():
    exported = torch.export.export(MyModel().eval(), (torch.randn(32, 100),), dynamic_shapes=({0: Dim("batch")},))
    assert exported.module()(torch.randn(1, 100)).shape == (1, 10)


@backs("notebooks/00_guide.ipynb", "给它们各自的 `Dim` 时 `torch.export` 会报 \"Constraints violated\" 并建议你让二者相等")
def test_separate_dims_that_must_be_equal_are_reported_with_a_fix():
    with pytest.raises(torch._dynamo.exc.UserError, match="(?s)Constraints violated.*Suggested fixes:\n  b = a"):
        torch.export.export(GatedPair().eval(), (torch.randn(8, 16), torch.randn(8, 16)),
                            dynamic_shapes=({0: Dim("a")}, {0: Dim("b")}))


@backs("notebooks/00_guide.ipynb", "可用 `torch.export.save` 存成 `.pt2`")
def test_export_save_writes_a_pt2_archive(tmp_path, caplog):
    exported = torch.export.export(MyModel().eval(), (torch.randn(32, 100),))
    with caplog.at_level(logging.WARNING):
        torch.export.save(exported, tmp_path / "model.pt2")
        assert "ending in .pt2" not in caplog.text
        torch.export.save(exported, tmp_path / "model.bin")
    assert "Expect archive file to be a file ending in .pt2" in caplog.text
    assert zipfile.is_zipfile(tmp_path / "model.pt2")


@pytest.fixture(scope="module")
def aoti_package(tmp_path_factory):
    """Chapter 00's AOTInductor package of MyModel, and the warnings compiling it raised."""
    exported = torch.export.export(MyModel().eval(), (torch.randn(32, 100),), dynamic_shapes=({0: Dim("batch")},))
    path = tmp_path_factory.mktemp("aoti") / "mymodel.pt2"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        package = torch._inductor.aoti_compile_and_package(exported, package_path=str(path))
    return package, caught


@backs("notebooks/00_guide.ipynb", "里面是 Inductor 生成并编译好的 C++ 代码和权重")
def test_an_aoti_package_holds_generated_cpp_and_a_compiled_library_with_the_weights(aoti_package):
    package, _ = aoti_package
    names = zipfile.ZipFile(package).namelist()
    assert any(n.endswith(".wrapper.cpp") for n in names) and any(n.endswith(".so") for n in names)
    assert torch._inductor.config.aot_inductor.package_constants_in_so
    assert torch._inductor.aoti_load_package(package)(torch.randn(7, 100)).shape == (7, 10)


@backs("notebooks/00_guide.ipynb", "torch 内部的一条与我们无关的 FutureWarning")
def test_aoti_compile_raises_a_future_warning_from_torch_internals(aoti_package):
    _, caught = aoti_package
    assert any(issubclass(w.category, FutureWarning) and "LeafSpec" in str(w.message) for w in caught)


@backs("notebooks/00_guide.ipynb", "`torch::inductor::AOTIModelPackageLoader` 加载")
def test_aoti_packages_have_a_cpp_loader():
    header = TORCH / "include/torch/csrc/inductor/aoti_package/model_package_loader.h"
    assert "class TORCH_API AOTIModelPackageLoader" in header.read_text(encoding="utf-8")


@backs("notebooks/00_guide.ipynb", "在 2.13 已经是 `torch.onnx.export` 的**默认值**")
@backs("notebooks/00_guide.ipynb", "2.13 默认 `dynamo=True`")
def test_onnx_export_goes_through_torch_export_by_default():
    assert inspect.signature(torch.onnx.export).parameters["dynamo"].default is True
    from torch.onnx._internal.exporter import _capture_strategies
    assert {s.__name__ for s in _capture_strategies.CAPTURE_STRATEGIES} == {
        "TorchExportNonStrictStrategy", "TorchExportStrictStrategy"}


@backs("notebooks/00_guide.ipynb", "需要 `onnxscript`")
def test_onnx_export_needs_onnxscript():
    exporter_core = TORCH / "onnx/_internal/exporter/_core.py"
    assert "\nimport onnxscript\n" in exporter_core.read_text(encoding="utf-8")
    if importlib.util.find_spec("onnxscript") is None:
        with pytest.raises(ModuleNotFoundError, match="onnxscript"):
            torch.onnx.export(nn.ReLU(), (torch.randn(2),), io.BytesIO())


# --- section 3: the measured table --------------------------------------------------------

@backs("notebooks/00_guide.ipynb", "导出图在 Python 里逐个调用 ATen 算子")
def test_an_exported_module_is_a_graph_module_calling_aten_ops():
    module = torch.export.export(MyModel().eval(), (torch.randn(32, 100),)).module()
    calls = [n.target for n in module.graph.nodes if n.op == "call_function"]
    assert isinstance(module, torch.fx.GraphModule) and calls
    assert all(isinstance(t, torch._ops.OpOverload) for t in calls)


@backs("notebooks/00_guide.ipynb", "在 eager 下是 6 个 ATen 算子")
def test_the_pointwise_chain_is_six_aten_ops():
    assert aten_calls(PointwiseChain(), torch.randn(8)) == [
        "aten.sin.default", "aten.cos.default", "aten.add.Tensor", "aten.mul.Tensor", "aten.relu.default",
        "aten.sub.Tensor"]


@backs("lib/course_models/ch00_models.py", "six elementwise ATen ops in eager mode")
def test_the_pointwise_chain_docstring_counts_six_ops():
    assert len(aten_calls(PointwiseChain(), torch.randn(8))) == 6


@backs("notebooks/00_guide.ipynb", "Inductor 把它们融合成一个 C++ 循环")
def test_inductor_fuses_the_pointwise_chain_into_one_cpp_kernel():
    torch._dynamo.reset()
    _, (code,) = run_and_get_code(torch.compile(PointwiseChain()), torch.randn(1000))
    assert code.count('extern "C"') == 1 and "cpp_fused_add_cos_mul_relu_sin_sub" in code


@backs("notebooks/00_guide.ipynb", "它默认 `check_trace=True`，追踪完还要再追踪一遍、把两次的图和输出互相核对")
def test_jit_trace_checks_its_trace_by_default():
    from torch.jit import _trace
    assert inspect.signature(torch.jit.trace).parameters["check_trace"].default is True
    check = inspect.getsource(_trace._check_trace)
    assert "torch.jit.trace(" in check and "graph_diagnostic_info" in check and "compare_outputs" in check


@backs("notebooks/00_guide.ipynb", "子模块 `Linear` 的调用在 TorchScript 的解释器里完成")
def test_a_scripted_module_calls_its_submodules_inside_torchscript():
    scripted = quietly(torch.jit.script, MyModel())
    assert isinstance(scripted.forward, torch._C.ScriptMethod)
    assert str(scripted.graph).count("prim::CallMethod[name=\"forward\"]") == 2


@backs("notebooks/00_guide.ipynb", "CPU 上它没有融合器在工作")
def test_torchscript_fuses_nothing_on_the_cpu():
    assert not torch._C._jit_can_fuse_on_cpu()
    scripted = quietly(torch.jit.script, PointwiseChain())
    for _ in range(3):
        scripted(torch.randn(1000))
    assert "Group" not in str(torch.jit.last_executed_optimized_graph())


@backs("notebooks/00_guide.ipynb", "`torch.__config__.show()` 里的 `BLAS_INFO`")
def test_the_build_config_names_the_blas_library():
    assert "BLAS_INFO=mkl" in torch.__config__.show() and torch.backends.mkldnn.is_available()


@backs("notebooks/00_guide.ipynb", "`model.compile()` 只编译模型的前向和它的反向")
@backs("notebooks/00_guide.ipynb", "交叉熵在模型之外，SGD 的 `optimizer.step()` 也不在编译范围内")
def test_module_compile_captures_the_model_not_the_loss_or_the_optimizer():
    graphs = []
    torch._dynamo.reset()
    counters.clear()
    model = Classifier()
    model.compile(backend=recording_backend(graphs))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for _ in range(2):
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(torch.randn(32, 784)), torch.randint(0, 10, (32,))).backward()
        optimizer.step()
    assert [kind for kind, _ in graphs] == ["forward", "backward"] and counters["stats"]["unique_graphs"] == 1
    ops = {op for _, calls in graphs for op in calls}
    pointwise = ops - {"aten.t.default", "aten.addmm.default", "aten.mm.default", "aten.sum.dim_IntList",
                       "aten.view.default", "aten.detach.default"}
    assert pointwise == {"aten.relu.default", "aten.threshold_backward.default"}


@backs("notebooks/00_guide.ipynb", "eager 为每个算子发射一个内核")
def test_the_recorded_chain_is_four_aten_ops():
    assert aten_calls(seed_chain, torch.randn(8)) == [
        "aten.add.Tensor", "aten.mul.Tensor", "aten.sub.Tensor", "aten.relu.default"]


@backs("notebooks/00_guide.ipynb", "硬件说明写着 `torch 2.11.0+cu130`，不是本课程的 torch 2.13")
@backs("notebooks/01_compile.ipynb", "硬件说明写着 `torch 2.11.0+cu130`，不是本课程的 torch 2.13")
def test_the_recorded_gpu_numbers_come_from_torch_2_11_not_the_course_torch():
    recorded, _ = gpu_reference()
    assert recorded["torch"] == "2.11.0+cu130" and "torch 2.11.0+cu130" in recorded["hardware"]
    assert torch.__version__.startswith("2.13")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="counts CUDA kernels")
@backs("notebooks/00_guide.ipynb", "编译后融合成一个内核")
def test_on_cuda_eager_launches_a_kernel_per_op_and_compiled_one():
    from course_models.ch00_models import cuda_kernels
    x = torch.randn(1 << 20, device="cuda")
    torch._dynamo.reset()
    assert len(cuda_kernels(seed_chain, x)) == 4 and len(cuda_kernels(torch.compile(seed_chain), x)) == 1


# --- section 4 and the FAQ ----------------------------------------------------------------

@backs("notebooks/00_guide.ipynb", "`t.default`（转置）是一个**视图** (view)")
def test_transpose_is_a_view_op():
    assert torch.ops.aten.t.default.is_view and not torch.ops.aten.addmm.default.is_view


@backs("notebooks/00_guide.ipynb", "`relu` 后面的 `detach.default` 也是视图")
@backs("notebooks/00_guide.ipynb", "在 `torch.no_grad()` 下追踪，图里就没有它")
def test_make_fx_records_the_detach_autograd_makes_saving_relus_output():
    assert torch.ops.aten.detach.default.is_view
    traced = make_fx(MyModel())(torch.randn(32, 100))
    [detach] = [n for n in traced.graph.nodes if n.target is torch.ops.aten.detach.default]
    assert detach.args[0].target is torch.ops.aten.relu.default and not detach.users
    with torch.no_grad():
        assert "aten.detach.default" not in aten_calls(MyModel(), torch.randn(32, 100))
    assert hasattr(torch.relu(torch.randn(3, requires_grad=True)).grad_fn, "_saved_result")


@backs("notebooks/00_guide.ipynb", "默认 `/tmp/torchinductor_<用户名>`，可用 `TORCHINDUCTOR_CACHE_DIR` 指定")
def test_inductor_cache_dir_default_and_override(monkeypatch, tmp_path):
    import getpass
    assert default_cache_dir() == os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert cache_dir() == str(tmp_path)


@backs("notebooks/00_guide.ipynb", "PyTorch 2.13 默认 `dynamic=None`（自动动态形状）")
@backs("notebooks/00_guide.ipynb", "**之后不再重编译**")
def test_automatic_dynamic_shapes_compile_four_batches_twice():
    assert inspect.signature(torch.compile).parameters["dynamic"].default is None
    graphs = {}
    for dynamic in (None, False):
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(MyModel(), backend="eager", dynamic=dynamic)
        for batch in (16, 32, 64, 128):
            compiled(torch.randn(batch, 100))
        graphs[dynamic] = counters["stats"]["unique_graphs"]
    torch._dynamo.reset()
    assert graphs == {None: 2, False: 4}


@backs("notebooks/00_guide.ipynb", "`nn.LazyLinear` 只是\"第一次调用时才推断 `in_features`\"的延迟初始化")
def test_lazy_linear_infers_in_features_on_its_first_call():
    layer = nn.LazyLinear(10)
    assert layer.in_features == 0
    layer(torch.randn(2, 7))
    assert layer.in_features == 7 and type(layer) is nn.Linear
