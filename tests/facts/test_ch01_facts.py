"""Facts about torch 2.13 that chapter 01 (torch.compile) relies on, each pinned to its sentence.

A few facts are compiles by nature (Inductor's generated code, the minifier, TORCH_TRACE);
everything else uses the ``eager`` backend or reads the source.
"""
import dataclasses
import getpass
import inspect
import logging
import operator
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
import torch
import torch._dynamo
import torch.nn as nn
from functorch.compile import make_boxed_func
from torch._dynamo import config
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.backends.registry import _COMPILER_FNS, get_default_backend
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import counters
from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir
from torch._inductor.utils import run_and_get_code
from torch._subclasses.fake_tensor import FakeTensor

from course_models.ch01_models import BREAK_SUSPECTS, running_stats, seed_chain
from facts import backs, fresh_dynamo, guards_text, logged, recording, tlparse_report, torch_trace_logs

pytestmark = pytest.mark.usefixtures(fresh_dynamo.__name__)

TORCH_ROOT = Path(torch.__file__).parent


def messages(records) -> str:
    return "\n".join(record.getMessage() for record in records)


def double_plus_one(x):
    return x * 2 + 1


def compile_count(dynamic, batch_sizes) -> list:
    """The graphs Dynamo compiles for ``double_plus_one`` over inputs of shape (batch, 5)."""
    graphs = []
    compiled = torch.compile(double_plus_one, backend=recording(graphs), dynamic=dynamic)
    for batch in batch_sizes:
        compiled(torch.ones(batch, 5))
    return graphs


def targets(gm) -> list:
    return [node.target for node in gm.graph.nodes if node.op == "call_function"]


def explained(fn, *args):
    return torch._dynamo.explain(fn)(*args)


def scale_by(x, k):
    return x * k


def suspicious(x):
    return torch.relu(x * 1.7) + x.sin()


# --- 2.1 Dynamo's graph --------------------------------------------------------------------------------

def seed_graph():
    graphs = []
    torch.compile(seed_chain, backend=recording(graphs))(torch.randn(1000))
    [gm] = graphs
    return gm


@backs("notebooks/01_compile.ipynb", "输入 `L_x_`（`L` 表示局部变量 local）")
def test_the_dynamo_graph_names_its_input_after_the_local_x():
    assert [node.target for node in seed_graph().graph.nodes if node.op == "placeholder"] == ["L_x_"]


@backs("notebooks/01_compile.ipynb", "`+`、`*`、`-` 被记录为 Python 的 `operator.add` 等函数，`torch.relu` 原样保留")
def test_the_dynamo_graph_records_operators_and_torch_relu():
    assert targets(seed_graph()) == [operator.add, operator.mul, operator.sub, torch.relu]


@backs("notebooks/01_compile.ipynb", "节点上还带着 Dynamo 用假张量（fake tensor）推出来的形状")
@backs("notebooks/01_compile.ipynb", "存在 `node.meta['example_value']` 里")
def test_the_dynamo_graph_carries_fake_tensor_shapes():
    values = [node.meta["example_value"] for node in seed_graph().graph.nodes if node.op == "call_function"]
    assert all(isinstance(value, FakeTensor) and value.shape == (1000,) for value in values)


# --- 2.2 AOTAutograd -----------------------------------------------------------------------------------

def aten_graphs_of(x) -> dict:
    kept = {}

    def keep_as(name):
        def compiler(gm, example_inputs):
            kept[name] = gm
            return make_boxed_func(gm.forward)
        return compiler

    backend = aot_autograd(fw_compiler=keep_as("forward"), bw_compiler=keep_as("backward"),
                           inference_compiler=keep_as("inference"))
    out = torch.compile(seed_chain, backend=backend)(x)
    if out.requires_grad:
        out.sum().backward()
    return kept


@backs("notebooks/01_compile.ipynb", "**只有需要梯度时**才会拆")
def test_aot_autograd_splits_forward_and_backward_only_when_grad_is_needed():
    assert list(aten_graphs_of(torch.randn(1000))) == ["inference"]
    torch._dynamo.reset()
    assert list(aten_graphs_of(torch.randn(1000, requires_grad=True))) == ["forward", "backward"]
    torch._dynamo.reset()
    with torch.no_grad():
        assert list(aten_graphs_of(torch.randn(1000, requires_grad=True))) == ["inference"]


@backs("notebooks/01_compile.ipynb", "每个节点现在都是 `torch.ops.aten.xxx` 的一个重载（`add.Tensor`、`relu.default`……）")
def test_the_inference_graph_calls_aten_overloads():
    aten = torch.ops.aten
    assert targets(aten_graphs_of(torch.randn(1000))["inference"]) == [aten.add.Tensor, aten.mul.Tensor,
                                                                      aten.sub.Tensor, aten.relu.default]


@backs("notebooks/01_compile.ipynb", "前向图多返回了反向需要保存的值（这里是 `relu` 的输出）")
def test_the_forward_graph_also_returns_what_backward_saves():
    forward = aten_graphs_of(torch.randn(1000, requires_grad=True))["forward"]
    [output] = [node for node in forward.graph.nodes if node.op == "output"]
    relu, saved = output.args[0]
    assert relu.target is torch.ops.aten.relu.default
    assert saved.target is torch.ops.aten.detach.default and saved.args[0] is relu


@backs("notebooks/01_compile.ipynb", "反向图用 `threshold_backward` 实现 ReLU 的梯度，链式法则里的 `* 2` 也在其中")
def test_the_backward_graph_uses_threshold_backward_and_the_factor_two():
    backward = aten_graphs_of(torch.randn(1000, requires_grad=True))["backward"]
    calls = [(node.target, node.args[1:]) for node in backward.graph.nodes if node.op == "call_function"]
    assert torch.ops.aten.threshold_backward.default in [target for target, _ in calls]
    assert (torch.ops.aten.mul.Tensor, (2,)) in calls


def compiled_keeping_kinds(fn, kept: list):
    """``fn`` compiled through AOTAutograd; each graph it hands on appends its kind to ``kept``."""
    def keep_as(kind):
        def compiler(gm, example_inputs):
            kept.append(kind)
            return make_boxed_func(gm.forward)
        return compiler

    return torch.compile(fn, backend=aot_autograd(fw_compiler=keep_as("forward"), bw_compiler=keep_as("backward"),
                                                  inference_compiler=keep_as("inference")))


def aten_graph_kinds(fn, x) -> list:
    """The graphs AOTAutograd hands on during one call (a backward graph waits for .backward())."""
    kept = []
    torch._dynamo.reset()
    compiled_keeping_kinds(fn, kept)(x)
    return kept


@backs("notebooks/01_compile.ipynb", "`nn.Module` 的参数默认 `requires_grad=True`，所以即使输入不需要梯度")
def test_a_module_with_trainable_parameters_gets_a_forward_graph_even_for_an_input_without_grad():
    assert aten_graph_kinds(nn.Linear(4, 4), torch.randn(2, 4)) == ["forward"]


@backs("notebooks/01_compile.ipynb", "反向图等到第一次 `backward()` 才编译")
def test_the_backward_graph_is_compiled_at_the_first_backward():
    kept = []
    out = compiled_keeping_kinds(nn.Linear(4, 4), kept)(torch.randn(2, 4))
    assert kept == ["forward"]
    out.sum().backward()
    assert kept == ["forward", "backward"]


@backs("notebooks/01_compile.ipynb", "套上 `torch.no_grad()` 或 `torch.inference_mode()`，或者把参数设成 `requires_grad=False`")
def test_no_grad_inference_mode_or_frozen_parameters_give_the_inference_graph():
    with torch.no_grad():
        assert aten_graph_kinds(nn.Linear(4, 4), torch.randn(2, 4)) == ["inference"]
    with torch.inference_mode():
        assert aten_graph_kinds(nn.Linear(4, 4), torch.randn(2, 4)) == ["inference"]
    assert aten_graph_kinds(nn.Linear(4, 4).requires_grad_(False), torch.randn(2, 4)) == ["inference"]


# --- 2.3 Inductor's code -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seed_chain_code() -> str:
    torch._dynamo.reset()
    _, sources = run_and_get_code(torch.compile(seed_chain), torch.randn(1000))
    return sources[0]


def call_body(code: str) -> str:
    return code[code.index("    def call(self, args):"):code.index("runner = Runner")]


@backs("notebooks/01_compile.ipynb", "`TORCH_LOGS=output_code` 会打印同样的内容")
def test_output_code_is_a_log_artifact():
    assert "output_code" in torch._logging._internal.log_registry.artifact_names


@backs("notebooks/01_compile.ipynb", "被**融合**成一个内核 `cpp_fused_add_mul_relu_sub_0`——名字就是它融合的算子（按字母排序）加一个序号")
def test_the_fused_kernel_is_named_after_its_sorted_ops(seed_chain_code):
    assert re.findall(r"^cpp_fused_\w+(?= = async_compile)", seed_chain_code, re.M) == ["cpp_fused_add_mul_relu_sub_0"]


@backs("notebooks/01_compile.ipynb", "用 `at::vec::Vectorized` 做 SIMD 向量化")
def test_the_cpu_kernel_is_vectorized_and_clamps_for_relu(seed_chain_code):
    if not torch._inductor.cpu_vec_isa.pick_vec_isa():
        pytest.skip("this CPU has no vector ISA Inductor supports")
    assert "at::vec::Vectorized<float>" in seed_chain_code and "at::vec::clamp_min(" in seed_chain_code


@backs("notebooks/01_compile.ipynb", "`call` 函数分配一个输出缓冲区 `buf0`，启动一次内核就返回")
def test_call_allocates_one_buffer_and_launches_one_kernel(seed_chain_code):
    body = call_body(seed_chain_code)
    assert re.findall(r"\b(buf\d+) = empty_strided_cpu", body) == ["buf0"]
    assert re.findall(r"^\s+(cpp_fused_\w+)\(", body, re.M) == ["cpp_fused_add_mul_relu_sub_0"]


@backs("notebooks/01_compile.ipynb", "在 CPU 上 Inductor 生成的是 **C++/OpenMP** 代码（内核名以 `cpp_fused_` 开头）")
def test_cpu_kernels_are_cpp_compiled_through_cpp_pybinding(seed_chain_code):
    assert "cpp_fused_add_mul_relu_sub_0 = async_compile.cpp_pybinding(" in seed_chain_code
    assert 'extern "C"' in seed_chain_code


@backs("notebooks/01_compile.ipynb", "`poi` 表示逐点 pointwise")
def test_triton_kernel_names_take_the_first_three_letters_of_their_category():
    source = (TORCH_ROOT / "_inductor" / "codegen" / "triton.py").read_text(encoding="utf-8")
    assert "kernel_category = get_kernel_category_by_source_code(src_code)[:3]" in source
    from torch._inductor.wrapper_benchmark import get_kernel_category_by_source_code
    assert get_kernel_category_by_source_code("@triton_heuristics.pointwise(...)")[:3] == "poi"


@backs("notebooks/01_compile.ipynb", "在 `torch._inductor.config` 被导入时由环境变量 `CXX` 决定，没有设置时是 `g++`（macOS 上是 `clang++`）")
def test_inductors_compiler_is_cxx_at_import_else_gxx_or_clangxx_on_macos():
    source = (TORCH_ROOT / "_inductor" / "config.py").read_text()
    class_body = source[source.index("\nclass cpp:"):]
    assert re.search(r'\n    cxx: .* = \(\n        None,.*\n        os\.environ\.get\("CXX", "clang\+\+" if sys\.platform == "darwin" '
                     r'else "g\+\+"\),', class_body)


@backs("notebooks/01_compile.ipynb", "`None` 表示“先用 conda 装一个 g++”，只在设置了 `TORCH_INDUCTOR_INSTALL_GXX` 时才这样做")
def test_a_none_compiler_means_gxx_from_conda_only_when_asked():
    from torch._inductor.cpp_builder import cpp_compiler_search

    source = inspect.getsource(cpp_compiler_search)
    branch = source[source.index("if cxx is None:"):source.index("subprocess.check_output")]
    assert 'if not os.getenv("TORCH_INDUCTOR_INSTALL_GXX"):\n                    continue' in branch
    assert "cxx = install_gcc_via_conda()" in branch


@backs("notebooks/01_compile.ipynb", "torch 带的是 GNU 的 `libgomp.so.1`")
def test_torchs_wheel_ships_gnu_openmp_and_not_llvms():
    libraries = {path.name for path in (TORCH_ROOT / "lib").iterdir()}
    assert "libgomp.so.1" in libraries
    assert not any(name.startswith(("libomp", "libiomp")) for name in libraries)


@backs("notebooks/01_compile.ipynb", "与 torch.get_num_threads() 相同")
def test_cpp_threads_minus_one_means_torchs_thread_count():
    from torch._inductor.utils import parallel_num_threads

    assert re.search(r"^class cpp:(\n    .*|\n)*?\n    threads = -1$", (TORCH_ROOT / "_inductor" / "config.py").read_text(), re.M)
    source = inspect.getsource(parallel_num_threads)
    assert "if threads < 1:\n        threads = torch.get_num_threads()" in source


# --- 3. torch.compile's parameters ---------------------------------------------------------------------

def compile_defaults() -> dict:
    return {name: p.default for name, p in inspect.signature(torch.compile).parameters.items()}


@backs("notebooks/01_compile.ipynb", "真实默认值是 `mode=None`、`dynamic=None`")
def test_mode_and_dynamic_default_to_none_and_none_mode_means_default():
    defaults = compile_defaults()
    assert defaults["mode"] is None and defaults["dynamic"] is None
    assert 'if mode is None and options is None:\n        mode = "default"' in inspect.getsource(torch.compile)


@backs("notebooks/01_compile.ipynb", "| `backend` | `None`（即 `\"inductor\"`）")
def test_backend_defaults_to_none_which_means_inductor():
    assert compile_defaults()["backend"] is None
    assert get_default_backend() == "inductor"
    assert "backend = get_default_backend()" in inspect.getsource(torch.compile)


@backs("notebooks/01_compile.ipynb", "| `fullgraph` | `False` |")
def test_fullgraph_defaults_to_false():
    assert compile_defaults()["fullgraph"] is False


@backs("notebooks/01_compile.ipynb", "| `disable` | `False` |")
def test_disable_defaults_to_false():
    assert compile_defaults()["disable"] is False


@backs("notebooks/01_compile.ipynb", "直接设置 Inductor 的配置项（不能和 `mode` 同时用）")
def test_options_default_to_none_and_cannot_go_with_mode():
    assert compile_defaults()["options"] is None
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        torch.compile(seed_chain, mode="default", options={"max_autotune": True})


@backs("notebooks/01_compile.ipynb", "默认用 `torch._dynamo.config.recompile_limit`，为 8")
def test_recompile_limit_defaults_to_none_and_the_config_to_8():
    assert compile_defaults()["recompile_limit"] is None
    assert config.recompile_limit == 8


@backs("notebooks/01_compile.ipynb", "签名里另外三个参数 `name`、`isolate_recompiles`、`shapes_spec` 本章不用")
def test_the_signature_has_exactly_the_parameters_the_chapter_names():
    assert list(compile_defaults()) == ["model", "fullgraph", "dynamic", "backend", "mode", "options", "name",
                                        "disable", "recompile_limit", "isolate_recompiles", "shapes_spec"]


@backs("notebooks/01_compile.ipynb", "`\"max-autotune-no-cudagraphs\"`，以及新的 `\"lite\"`")
def test_the_modes_are_the_five_the_table_names():
    modes = torch._inductor.list_mode_options()
    assert set(modes) == {"default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "lite"}
    assert modes["reduce-overhead"] == {"triton.cudagraphs": True}
    assert modes["max-autotune"]["max_autotune"] and modes["max-autotune"]["triton.cudagraphs"]
    assert "triton.cudagraphs" not in modes["max-autotune-no-cudagraphs"]


@backs("notebooks/01_compile.ipynb", "`\"eager\"`（只捕获、不优化）、`\"aot_eager\"`（再过一遍 AOTAutograd）用来二分定位问题")
def test_eager_and_aot_eager_are_debug_backends():
    everything, default = torch.compiler.list_backends(exclude_tags=()), torch.compiler.list_backends()
    assert {"eager", "aot_eager", "aot_eager_decomp_partition"} <= set(everything) - set(default)


@backs("notebooks/01_compile.ipynb", "2.13 里没有 `onnxrt` 后端（`torch/_dynamo/backends/onnxrt.py` 里注册它的代码已被注释掉）")
@backs("notebooks/00_guide.ipynb", "连隐藏的那些里也没有 `onnxrt`")
def test_there_is_no_onnxrt_backend():
    assert "onnxrt" not in torch.compiler.list_backends(exclude_tags=())
    source = (TORCH_ROOT / "_dynamo" / "backends" / "onnxrt.py").read_text(encoding="utf-8")
    assert '#     register_backend(name="onnxrt", compiler_fn=torch_compile_backend)' in source
    assert not [line for line in source.splitlines() if "register_backend(" in line and not line.lstrip().startswith("#")]


@backs("notebooks/01_compile.ipynb", "它是带 `debug` 标签的调试后端，用 `torch.jit.script` 编译 Dynamo 的图")
def test_ts_is_a_debug_backend_that_scripts_the_graph():
    assert "ts" in torch.compiler.list_backends(exclude_tags=()) and "ts" not in torch.compiler.list_backends()
    assert _COMPILER_FNS["ts"]._tags == ("debug",)
    assert "torch.jit.script(gm)" in inspect.getsource(_COMPILER_FNS["ts"])


@backs("notebooks/01_compile.ipynb", "用 `torch.compile(model, trace_mode=\"verbose\")` 查看图中断。没有这个参数")
def test_there_is_no_trace_mode_parameter():
    with pytest.raises(TypeError, match="unexpected keyword argument 'trace_mode'"):
        torch.compile(seed_chain, trace_mode="verbose")


# --- 4. caches -----------------------------------------------------------------------------------------

@backs("notebooks/01_compile.ipynb", "实际默认是 `/tmp/torchinductor_<用户名>`")
def test_the_default_cache_is_torchinductor_user_in_the_temp_dir():
    assert default_cache_dir() == os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")


@backs("notebooks/01_compile.ipynb", "可以用环境变量 `TORCHINDUCTOR_CACHE_DIR` 改到别处")
def test_torchinductor_cache_dir_moves_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert cache_dir() == str(tmp_path)


@backs("notebooks/01_compile.ipynb", "用 `torch.compiler.save_cache_artifacts()` 打包、`torch.compiler.load_cache_artifacts(...)` 加载")
def test_cache_artifacts_can_be_saved_and_loaded():
    assert callable(torch.compiler.save_cache_artifacts) and callable(torch.compiler.load_cache_artifacts)


@backs("notebooks/01_compile.ipynb", "热缓存时 AOTAutograd 和 Inductor 的结果都从磁盘缓存里取")
def test_the_autograd_and_fx_graph_caches_are_on_by_default():
    assert torch._functorch.config.enable_autograd_cache is True
    assert torch._inductor.config.fx_graph_cache is True


# --- 5. where compiling wins and loses -----------------------------------------------------------------

@backs("notebooks/01_compile.ipynb", "在 CPU 上 Inductor 悄悄跳过 CUDA Graphs：不报错，也不发警告")
def test_reduce_overhead_on_cpu_skips_cudagraphs_and_counts_it():
    counters.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(lambda x: (x + 1).relu(), mode="reduce-overhead")(torch.randn(8))
    assert out.shape == (8,)
    assert not [w for w in caught if "cudagraph" in str(w.message).lower()]
    assert counters["inductor"]["cudagraph_skips"] == 1


@backs("notebooks/01_compile.ipynb", "`IMPLEMENT_VML_MKL(sin, Sin)`，调用 `vmsSin`，精度模式 `VML_HA`")
def test_eager_cpu_sin_and_cos_call_mkl_vml_in_high_accuracy_mode():
    assert torch.backends.mkl.is_available()
    vml = (TORCH_ROOT / "include" / "ATen" / "cpu" / "vml.h").read_text(encoding="utf-8")
    assert "IMPLEMENT_VML_MKL(sin, Sin)" in vml and "IMPLEMENT_VML_MKL(cos, Cos)" in vml
    assert "vm##mkltype##mklop(" in vml and "VML_HA" in vml


@backs("notebooks/01_compile.ipynb", "它调用 SLEEF 库误差上限 3.5 ULP 的快速版本")
def test_vectorized_float_sin_and_cos_are_sleefs_3_5_ulp_versions():
    vec = TORCH_ROOT / "include" / "ATen" / "cpu" / "vec"
    avx2 = (vec / "vec256" / "vec256_float.h").read_text(encoding="utf-8")
    avx512 = (vec / "vec512" / "vec512_float.h").read_text(encoding="utf-8")
    assert "Sleef_sinf8_u35(values)" in avx2 and "Sleef_cosf8_u35(values)" in avx2
    assert "Sleef_sinf16_u35(values)" in avx512 and "Sleef_cosf16_u35(values)" in avx512


@backs("notebooks/01_compile.ipynb", "Inductor 生成的 C++ 里是上面打印的 `tmp0.sin()`")
def test_inductor_computes_sin_with_vectorized_sin_on_cpu():
    if not torch._inductor.cpu_vec_isa.pick_vec_isa():
        pytest.skip("this CPU has no vector ISA Inductor supports")
    _, sources = run_and_get_code(torch.compile(lambda x: x.sin()), torch.randn(2**20))
    assert re.search(r"auto tmp1 = tmp0\.sin\(\);", sources[0]) and "at::vec::Vectorized<float>" in sources[0]


def small_encoder_layer():
    return nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)


@backs("notebooks/01_compile.ipynb", "直接对 PyTorch 自带的模块调用 `.compile()`，什么也没编译")
def test_compiling_an_nn_module_of_torch_itself_captures_no_graph():
    layer, graphs = small_encoder_layer(), []
    layer.compile(backend=recording(graphs))
    layer(torch.randn(2, 4, 8))
    assert graphs == []


@backs("notebooks/01_compile.ipynb", "它只在追踪你的代码时把它们内联进来")
def test_the_same_module_is_inlined_when_user_code_calls_it():
    layer, graphs = small_encoder_layer(), []
    torch.compile(lambda x: layer(x) + 1, backend=recording(graphs))(torch.randn(2, 4, 8))
    assert len(graphs) == 1 and torch.nn.functional.layer_norm in targets(graphs[0])


def fast_path_calls(monkeypatch, training: bool) -> list:
    calls = []
    original = torch._transformer_encoder_layer_fwd
    monkeypatch.setattr(torch, "_transformer_encoder_layer_fwd", lambda *a, **k: calls.append(1) or original(*a, **k))
    layer = small_encoder_layer().train(training)
    with torch.set_grad_enabled(training):
        layer(torch.randn(2, 4, 8))
    return calls


@backs("notebooks/01_compile.ipynb", "在 `eval()` + `no_grad()` 下走一条手写的融合快速路径 (fast path)")
def test_the_encoder_layer_takes_its_fused_fast_path_in_eval_without_grad(monkeypatch):
    assert fast_path_calls(monkeypatch, training=False) == [1]


@backs("notebooks/01_compile.ipynb", "快速路径在训练时不可用")
def test_the_encoder_layer_does_not_take_the_fast_path_when_training(monkeypatch):
    assert fast_path_calls(monkeypatch, training=True) == []


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x))


@backs("notebooks/01_compile.ipynb", "守卫检查 `requires_grad`，所以块的代码编译两次")
def test_identical_blocks_compile_twice_when_only_the_first_input_needs_no_grad():
    graphs = []
    backend, blocks = recording(graphs), [Block() for _ in range(4)]
    for block in blocks:
        block.compile(backend=backend)
    x = torch.randn(2, 8)
    torch._logging.set_logs(recompiles=True)
    try:
        with logged("torch._dynamo.guards.__recompiles") as records:
            for block in blocks:
                x = block(x)
    finally:
        torch._logging.set_logs()
    assert len(graphs) == 2
    assert "requires_grad mismatch" in messages(records)


# --- 6. recompilation and automatic dynamic shapes -----------------------------------------------------

@backs("notebooks/01_compile.ipynb", "之后的 64、128 都复用这张图。一共 2 次")
def test_automatic_dynamic_compiles_twice_for_four_batch_sizes():
    assert len(compile_count(None, [16, 32, 64, 128])) == 2


@backs("notebooks/01_compile.ipynb", "`dynamic=False`：每种新形状编译一次——4 次")
def test_static_shapes_compile_once_per_batch_size():
    assert len(compile_count(False, [16, 32, 64, 128])) == 4


@backs("notebooks/01_compile.ipynb", "`dynamic=True`：一开始就把所有维度当作动态——1 次")
def test_dynamic_true_compiles_once_with_every_dimension_symbolic():
    [gm] = compile_count(True, [16, 32, 64, 128])
    sizes = [node for node in gm.graph.nodes if node.op == "placeholder" and isinstance(node.meta["example_value"], torch.SymInt)]
    assert len(sizes) == 2


@backs("notebooks/01_compile.ipynb", "它多了一个 `SymInt` 输入（`s77` 之类的名字，表示\"某个 ≥ 2 的整数\"）")
def test_the_dynamic_graph_takes_a_symint_at_least_2():
    static, dynamic = compile_count(None, [16, 32])
    [size] = [node for node in dynamic.graph.nodes if node.op == "placeholder" and node.name != "l_x_"]
    value = size.meta["example_value"]
    assert isinstance(value, torch.SymInt) and re.fullmatch(r"s\d+", size.name)
    assert value.node.shape_env.var_to_range[value.node.expr].lower == 2


@backs("notebooks/01_compile.ipynb", "`size mismatch at index 0. expected 16, actual 32`")
def test_the_recompile_log_names_the_size_mismatch_and_automatic_dynamic():
    torch._logging.set_logs(recompiles=True, dynamic=logging.INFO)
    try:
        with logged("torch._dynamo.guards.__recompiles") as recompiles, logged("torch.fx.experimental.symbolic_shapes") as pgo:
            compile_count(None, [16, 32])
    finally:
        torch._logging.set_logs()
    assert "tensor 'x' size mismatch at index 0. expected 16, actual 32" in messages(recompiles)
    assert "marking L['x'] as dynamic (from automatic dynamic/PGO)" in messages(pgo)


@backs("notebooks/01_compile.ipynb", "batch 为 1 的输入会得到自己的静态图")
def test_size_one_is_specialized_under_automatic_dynamic():
    assert len(compile_count(None, [8, 1, 8, 3, 1])) == 3


@backs("notebooks/01_compile.ipynb", "`dynamic=True` 也不是\"永远只编译一次\"：batch 为 1 时仍会另外编译")
def test_size_one_is_specialized_even_with_dynamic_true():
    assert len(compile_count(True, [8, 1, 3])) == 2


@backs("notebooks/01_compile.ipynb", "`torch._dynamo hit config.recompile_limit (8)`")
def test_past_the_limit_dynamo_warns_with_the_last_reason_and_stops_compiling():
    with logged("torch._dynamo.convert_frame") as records:
        assert len(compile_count(False, list(range(2, 14)))) == 8
    warned = messages(r for r in records if r.levelno == logging.WARNING)
    assert "torch._dynamo hit config.recompile_limit (8)" in warned and "last reason: " in warned


@backs("notebooks/01_compile.ipynb", "用 `torch._dynamo.mark_dynamic(x, 0)` 直接声明，省掉那次静态编译")
def test_mark_dynamic_compiles_once():
    graphs = []
    compiled = torch.compile(double_plus_one, backend=recording(graphs))
    for batch in [16, 32, 64, 128]:
        x = torch.ones(batch, 5)
        torch._dynamo.mark_dynamic(x, 0)
        compiled(x)
    assert len(graphs) == 1


@backs("notebooks/01_compile.ipynb", "`torch._dynamo.reset()` 不清零它们，要用 `counters.clear()`")
def test_unique_graphs_counts_graphs_and_survives_reset():
    counters.clear()
    compile_count(False, [2, 3])
    assert counters["stats"]["unique_graphs"] == 2
    torch._dynamo.reset()
    assert counters["stats"]["unique_graphs"] == 2


# --- 7. graph breaks -----------------------------------------------------------------------------------

def break_count(name: str) -> int:
    return explained(BREAK_SUSPECTS[name], torch.randn(8)).graph_break_count


@backs("notebooks/01_compile.ipynb", "按张量的**值**分支（`value_branch`：`if x.sum() > 0`）才会中断")
def test_branching_on_a_value_breaks_the_graph():
    assert break_count("value_branch") == 1


@backs("notebooks/01_compile.ipynb", "按**形状**或 **dtype** 分支（`shape_branch`、`dtype_branch`）在捕获时就能确定走哪边")
def test_branching_on_shape_or_dtype_does_not_break():
    assert [break_count("shape_branch"), break_count("dtype_branch")] == [0, 0]


@backs("notebooks/01_compile.ipynb", "把分支写成张量运算 `torch.where`，或者用 `torch.cond`，就没有中断")
def test_where_and_cond_do_not_break():
    assert [break_count("where_branch"), break_count("cond_branch")] == [0, 0]


@backs("notebooks/01_compile.ipynb", "`list_append` 的结果是 0 次中断")
def test_appending_to_a_list_does_not_break():
    assert break_count("list_append") == 0


@backs("notebooks/01_compile.ipynb", "`x.item()`（把张量变成 Python 数）和 `print`（Python 的副作用）默认确实会中断")
def test_item_and_print_break_by_default():
    assert [break_count("item_call"), break_count("print_call")] == [1, 1]


@backs("notebooks/01_compile.ipynb", "Graph break from `Tensor.item()`")
def test_the_item_break_warns_and_suggests_capture_scalar_outputs():
    torch._dynamo.variables.tensor.TensorVariable._warn_capture_scalar_outputs.cache_clear()
    with logged("torch._dynamo.variables.tensor") as records:
        break_count("item_call")
    warned = messages(r for r in records if r.levelno == logging.WARNING)
    assert "Graph break from `Tensor.item()`, consider setting:" in warned
    assert "torch._dynamo.config.capture_scalar_outputs = True" in warned


@backs("notebooks/01_compile.ipynb", "这段警告每个进程只打一次")
def test_the_item_break_warning_is_given_once_per_process():
    torch._dynamo.variables.tensor.TensorVariable._warn_capture_scalar_outputs.cache_clear()
    with logged("torch._dynamo.variables.tensor") as records:
        break_count("item_call")
        torch._dynamo.reset()
        break_count("item_call")
    assert messages(records).count("Graph break from `Tensor.item()`") == 1


@backs("notebooks/01_compile.ipynb", "`capture_scalar_outputs=True` 让 `.item()` 的结果在图里成为一个符号化的数（SymFloat）")
def test_captured_item_is_a_symfloat_in_one_graph():
    with config.patch(capture_scalar_outputs=True):
        result = explained(BREAK_SUSPECTS["item_call"], torch.randn(8))
    assert result.graph_break_count == 0
    [item] = [n for n in result.graphs[0].graph.nodes if n.op == "call_method" and n.target == "item"]
    assert isinstance(item.meta["example_value"], torch.SymFloat)


@backs("notebooks/01_compile.ipynb", "`reorderable_logging_functions` 允许 Dynamo 把 `print` 挪到图执行之后")
def test_reorderable_print_runs_after_the_graph_without_a_break():
    events = []

    def backend(gm, example_inputs):
        def run(*args):
            events.append("graph")
            return gm.forward(*args)
        return run

    def noted(*args):
        events.append("print")

    def program(x):
        y = x * 2
        noted("y =", y)
        return y + 1

    with config.patch(reorderable_logging_functions={noted}):
        torch.compile(program, backend=backend)(torch.randn(4))
        assert events == ["graph", "print"]
        torch._dynamo.reset()
        assert explained(program, torch.randn(4)).graph_break_count == 0


@backs("notebooks/01_compile.ipynb", "不是按张量的值分支、`print` 那样的 `torch._dynamo.exc.Unsupported`")
def test_fullgraph_raises_unsupported_at_a_value_branch_and_a_print():
    with pytest.raises(torch._dynamo.exc.Unsupported, match="Data-dependent branching"):
        torch.compile(BREAK_SUSPECTS["value_branch"], fullgraph=True, backend="eager")(torch.randn(8))
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(BREAK_SUSPECTS["print_call"], fullgraph=True, backend="eager")(torch.randn(8))


@backs("notebooks/01_compile.ipynb", "`fullgraph=True` 同时打开 `capture_scalar_outputs`")
@backs("notebooks/01_compile.ipynb", "它同时让 `.item()` 进图")
def test_fullgraph_captures_item_like_capture_scalar_outputs():
    assert "capture_scalar_outputs and capture_dynamic_output_shape_ops on by default" in " ".join(torch.compile.__doc__.split())
    assert config.capture_scalar_outputs is False
    graphs = []
    fn = BREAK_SUSPECTS["item_call"]
    x = torch.randn(8)
    assert torch.equal(torch.compile(fn, fullgraph=True, backend=recording(graphs))(x), fn(x))
    [graph] = graphs
    assert "item" in [n.target for n in graph.graph.nodes if n.op == "call_method"]


def branch_on_item(x):
    if x.sum().item() > 0:
        return x * 2
    return x - 1


@backs("notebooks/01_compile.ipynb", "报的是 `torch._dynamo.exc.UserError`（`Could not guard on data-dependent expression`）")
def test_fullgraph_raises_user_error_at_a_branch_on_a_captured_item():
    with pytest.raises(torch._dynamo.exc.UserError, match="Could not guard on data-dependent expression"):
        torch.compile(branch_on_item, fullgraph=True, backend="eager")(torch.randn(8))


@backs("notebooks/01_compile.ipynb", "看 `Graph break in user code at` 指向的代码行和 `Graph Break Reason`（这里是 `Data-dependent branching`")
def test_the_graph_breaks_log_names_the_line_and_the_reason():
    torch._logging.set_logs(graph_breaks=True)
    try:
        with logged("torch._dynamo.symbolic_convert.__graph_breaks") as records:
            torch.compile(BREAK_SUSPECTS["value_branch"], backend="eager")(torch.randn(8))
    finally:
        torch._logging.set_logs()
    logged_text = messages(records)
    assert "Graph break in user code at " in logged_text and "Graph Break Reason: Data-dependent branching" in logged_text


@backs("notebooks/01_compile.ipynb", "字段 `graph_count`、`graph_break_count`、`break_reasons`")
def test_explain_output_has_the_fields_the_chapter_names():
    fields = {field.name for field in dataclasses.fields(torch._dynamo.backends.debugging.ExplainOutput)}
    assert {"graph_count", "graph_break_count", "break_reasons", "graphs", "ops_per_graph"} <= fields


@backs("notebooks/01_compile.ipynb", "`running_stats` 被切成 3 张图：循环和 `history.append` 都在第一张图里")
def test_running_stats_is_three_graphs_with_the_loop_in_the_first():
    result = explained(running_stats, torch.randn(8))
    assert (result.graph_count, result.graph_break_count) == (3, 2)
    assert [str(t) for t in result.ops_per_graph[0]].count(str(torch.tanh)) == 3


# --- 8. turning compilation off ------------------------------------------------------------------------

@backs("notebooks/01_compile.ipynb", "所有 `torch.compile` 过的函数改为 eager 执行，不编译")
def test_force_eager_stance_compiles_nothing_and_works_as_a_context():
    graphs = []
    compiled = torch.compile(double_plus_one, backend=recording(graphs))
    with torch.compiler.set_stance("force_eager"):
        compiled(torch.randn(8))
    assert graphs == []
    compiled(torch.randn(8))
    assert len(graphs) == 1


@backs("notebooks/01_compile.ipynb", "在编译函数内部调用它会产生一次图中断")
def test_calling_a_disabled_function_breaks_the_graph():
    @torch.compiler.disable
    def side(y):
        return y.mean()

    def program(x):
        y = torch.sin(x)
        side(y)
        return y * 2

    assert explained(program, torch.randn(8)).graph_break_count == 1


@backs("notebooks/01_compile.ipynb", "只对这一次 `torch.compile` 调用：返回的函数直接运行原函数")
def test_disable_true_compiles_nothing():
    graphs = []
    torch.compile(double_plus_one, backend=recording(graphs), disable=True)(torch.randn(8))
    assert graphs == []


@backs("notebooks/01_compile.ipynb", "环境变量 `TORCH_COMPILE_DISABLE=1`")
def test_torch_compile_disable_sets_the_disable_config_which_compiles_nothing():
    source = (TORCH_ROOT / "_dynamo" / "config.py").read_text(encoding="utf-8")
    assert 'disable = os.environ.get("TORCH_COMPILE_DISABLE", "0") == "1"' in source
    graphs = []
    with config.patch(disable=True):
        torch.compile(double_plus_one, backend=recording(graphs))(torch.randn(8))
    assert graphs == []


@backs("notebooks/01_compile.ipynb", "它只返回一个 `DisableContext` 对象")
def test_dynamo_disable_without_a_function_returns_a_context_that_cannot_be_entered():
    assert type(torch._dynamo.disable()).__name__ == "DisableContext"
    with pytest.raises(RuntimeError, match="is used with a context manager"):
        with torch._dynamo.disable():
            pass


# --- 9. debugging --------------------------------------------------------------------------------------

@backs("notebooks/01_compile.ipynb", "它把图里的 ReLU 换成错误的实现")
def test_the_accuracy_error_testing_backend_replaces_relu():
    x = torch.randn(1000)
    got = torch.compile(suspicious, backend="relu_accuracy_error_TESTING_ONLY")(x)
    assert torch.allclose(got, (x * 1.7) + 1 + x.sin())


@backs("notebooks/01_compile.ipynb", "再换上 Inductor 用的分解表 (decompositions) 和它切分前向/反向图的设置")
def test_aot_eager_decomp_partition_uses_inductors_decompositions_and_partitioner():
    source = inspect.getsource(torch._dynamo.backends.debugging.aot_eager_decomp_partition)
    assert ".select_decomp_table()" in source
    assert 'min_cut_rematerialization_partition, compiler="inductor"' in source


@backs("notebooks/01_compile.ipynb", "`repro_level`（环境变量 `TORCHDYNAMO_REPRO_LEVEL`）决定出错时写什么")
def test_the_minifier_is_switched_by_repro_after_and_repro_level():
    source = (TORCH_ROOT / "_dynamo" / "config.py").read_text(encoding="utf-8")
    assert 'repro_after = os.environ.get("TORCHDYNAMO_REPRO_AFTER", None)' in source
    assert 'repro_level = int(os.environ.get("TORCHDYNAMO_REPRO_LEVEL", 2))' in source


@backs("notebooks/01_compile.ipynb", "| 2（默认） | 编译出错时写一个启动脚本 `minifier_launcher.py`")
def test_the_repro_levels_are_the_four_the_table_names():
    source = (TORCH_ROOT / "_dynamo" / "config.py").read_text(encoding="utf-8")
    assert ("# 1: Dumps the original graph out to repro.py if compilation fails\n"
            "# 2: Dumps a minifier_launcher.py if compilation fails.\n"
            "# 3: Always dumps a minifier_launcher.py. Good for segfaults.\n"
            "# 4: Dumps a minifier_launcher.py if the accuracy fails.\n") in source


@backs("notebooks/01_compile.ipynb", "与 eager 的输出比较（容差 `repro_tolerance`）")
def test_the_accuracy_check_uses_repro_tolerance():
    debug_utils = torch._dynamo.debug_utils
    assert "return not same_two_models(" in inspect.getsource(debug_utils.backend_accuracy_fails)
    assert "tol=config.repro_tolerance" in inspect.getsource(debug_utils.same_two_models)


@backs("notebooks/01_compile.ipynb", "默认是当前目录下的 `torch_compile_debug/`")
def test_debug_dir_root_defaults_to_torch_compile_debug_in_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCH_COMPILE_DEBUG_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert config.default_debug_dir_root() == os.path.join(str(tmp_path), "torch_compile_debug")


@backs("notebooks/01_compile.ipynb", "图里有 `torch.relu`，它就抛出异常")
def test_the_compile_error_testing_backend_raises_on_relu():
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="ReluCompileError"):
        torch.compile(suspicious, backend="relu_compile_error_TESTING_ONLY")(torch.randn(8))
    torch._dynamo.reset()
    torch.compile(lambda x: x.sin(), backend="relu_compile_error_TESTING_ONLY")(torch.randn(8))


@pytest.fixture(scope="module")
def minifier_run(tmp_path_factory) -> dict:
    """The minifier on the chapter's broken backend: the failing compile, then its launcher run."""
    root = tmp_path_factory.mktemp("minifier")
    before = os.getcwd()
    os.chdir(root)
    try:
        torch._dynamo.reset()
        with config.patch(repro_after="dynamo", debug_dir_root=str(root / "torch_compile_debug")):
            with pytest.raises(torch._dynamo.exc.BackendCompilerFailed):
                torch.compile(suspicious, backend="relu_compile_error_TESTING_ONLY")(torch.randn(1000))
        torch._dynamo.reset()
    finally:
        os.chdir(before)
    after_compile = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    [launcher] = root.rglob("minifier_launcher.py")
    launched = subprocess.run([sys.executable, str(launcher)], cwd=root, capture_output=True, text=True, timeout=300)
    return {"root": root, "after_compile": after_compile, "launcher": launcher, "launched": launched}


@backs("notebooks/01_compile.ipynb", "以时间和进程号命名的 `run_…/minifier/` 目录")
def test_a_failing_compile_writes_only_the_launcher_under_a_run_directory(minifier_run):
    scripts = [path for path in minifier_run["after_compile"] if path.endswith(".py")]
    assert len(scripts) == 1
    assert re.fullmatch(rf"torch_compile_debug/run_[\d_]+-pid_{os.getpid()}/minifier/minifier_launcher\.py", scripts[0])


@backs("notebooks/01_compile.ipynb", "它在新的进程里按名字找回后端")
def test_the_launcher_minifies_with_the_backend_named_in_its_last_call(minifier_run):
    code = minifier_run["launcher"].read_text(encoding="utf-8")
    assert "run_repro(mod, load_args, accuracy=False, command='minify'," in code
    assert code.rstrip().endswith("backend='relu_compile_error_TESTING_ONLY')")


@backs("notebooks/01_compile.ipynb", "最后把仍然出错的最小的图写成**运行它的目录**里的 `repro.py`")
def test_running_the_launcher_writes_repro_py_where_it_runs(minifier_run):
    launched = minifier_run["launched"]
    assert launched.returncode == 0, launched.stderr[-2000:]
    assert (minifier_run["root"] / "repro.py").is_file()
    assert "Wrote minimal repro out to repro.py" in launched.stderr and re.search(r"^Made \d+ queries$", launched.stderr, re.M)


@backs("notebooks/01_compile.ipynb", "`repro.py` 里只剩 `torch.relu`")
def test_the_minified_repro_keeps_only_relu(minifier_run):
    code = (minifier_run["root"] / "repro.py").read_text(encoding="utf-8")
    forward = code[code.index("    def forward"):code.index("mod = Repro()")]
    assert re.findall(r"= (torch\.\w+|\w+ [*+] )", forward) == ["torch.relu"]


@backs("notebooks/01_compile.ipynb", "第一次编译的守卫是 `L['k'] == 2`，`recompiles` 日志里写作 `k == 2`")
def test_a_python_int_is_guarded_by_value_and_the_recompile_reason_says_so():
    compiled = torch.compile(scale_by, backend="eager")
    compiled(torch.randn(4), 2)
    assert "EQUALS_MATCH: L['k'] == 2" in guards_text(scale_by, 0)
    torch._logging.set_logs(recompiles=True)
    try:
        with logged("torch._dynamo.guards.__recompiles") as records:
            compiled(torch.randn(4), 3)
    finally:
        torch._logging.set_logs()
    assert "- 0/0: k == 2" in messages(records)


@backs("notebooks/01_compile.ipynb", "`k` 只剩类型检查 `TYPE_MATCH`")
def test_the_second_compile_makes_the_int_symbolic_and_new_values_reuse_it():
    compiled = torch.compile(scale_by, backend="eager")
    for k in (2, 3, 4, 5):
        compiled(torch.randn(4), k)
    entries = _debug_get_cache_entry_list(scale_by)
    assert len(entries) == 2
    newest = guards_text(scale_by, 0)
    assert "TYPE_MATCH: ___check_type_id(L['k']" in newest and "L['k'] ==" not in newest


TRACED_PROGRAM = ("import torch\n"
                  "def f(x):\n    return torch.relu(x * 2).sin()\n"
                  "torch.compile(f)(torch.randn(8, requires_grad=True)).sum().backward()\n")


@pytest.fixture(scope="module")
def traced_report(tmp_path_factory) -> dict:
    """The chapter's TORCH_TRACE run of a small program that needs gradients, and tlparse's report of it."""
    logs = torch_trace_logs(TRACED_PROGRAM, tmp_path_factory.mktemp("torch_trace"))
    report = tmp_path_factory.mktemp("tlparse") / "report"
    return {"logs": logs, "report": report, "directory": tlparse_report(logs[0], report)}


@backs("notebooks/01_compile.ipynb", "让每个进程把**结构化的编译日志**写进这个目录（每个进程一个文件）")
def test_torch_trace_writes_one_log_file_for_the_process(traced_report):
    assert [path.suffix for path in traced_report["logs"]] == [".log"]


@backs("notebooks/01_compile.ipynb", "还有一棵\"编译发生在哪里\"的调用栈树（Stack trie）")
def test_the_tlparse_index_has_a_stack_trie(traced_report):
    assert "<h2>Stack trie</h2>" in (traced_report["report"] / "index.html").read_text(encoding="utf-8")


@backs("notebooks/01_compile.ipynb", "两份 `inductor_output_code`（前向和反向各一份生成的代码）")
def test_the_compile_id_lists_every_stage_of_the_pipeline(traced_report):
    assert list(traced_report["directory"]) == ["[-/-]", "[0/0]"]
    names = [re.sub(r"(_[a-z0-9]{52})?_\d+\.\w+$", "", artifact["name"])
             for artifact in traced_report["directory"]["[0/0]"]["artifacts"]]
    stages = ["dynamo_output_graph", "aot_joint_graph", "aot_forward_graph", "aot_backward_graph",
              "dynamo_cpp_guards_str", "compilation_metrics"]
    assert all(name in names for name in stages)
    assert [name for name in stages[:4]] == [name for name in names if name in stages[:4]]
    assert names.count("inductor_output_code") == 2


@backs("notebooks/01_compile.ipynb", "还有 `aotautograd_cache_hit` / `fx_graph_cache_hit`（冷缓存时是 `…_miss`）")
def test_the_compile_id_says_whether_the_disk_caches_hit(traced_report):
    names = [artifact["name"] for artifact in traced_report["directory"]["[0/0]"]["artifacts"]]
    for cache in ("aotautograd_cache", "fx_graph_cache"):
        assert any(re.match(rf"{cache}_(hit|miss)_\d+\.json$", name) for name in names), cache
