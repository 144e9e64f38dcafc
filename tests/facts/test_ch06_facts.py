"""Facts about torch that chapter 06 (AOTAutograd) relies on, one test each."""
import importlib.metadata
import inspect
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchgen
from functorch.compile import aot_function, aot_module, default_partition, make_boxed_func, \
    min_cut_rematerialization_partition
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._functorch import config as functorch_config
from torch._functorch import partitioners
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.proxy_tensor import make_fx

from course_models.ch06_models import (SEED_STEPS, capture_graphs, chip_step, compute_bound_chip, glu_inputs,
                                       mlp_inputs, mlp_program, run_glu, saved_names)
from facts import backs
from graphviews.aot import saved_storage_bytes, tangent_dependent

aten = torch.ops.aten


def boxed(gm, example_inputs):
    return make_boxed_func(gm.forward)


def seed_fn(x, w):
    h = x @ w
    return (torch.tanh(h) * torch.sigmoid(h)).sum()


def leaves(*shapes):
    return [torch.randn(*shape, requires_grad=True) for shape in shapes]


def recording(calls: list, kind: str):
    """A compiler that notes its kind and the graph it got, then runs the graph as is."""
    def compiler(gm, example_inputs):
        calls.append((kind, gm))
        return make_boxed_func(gm.forward)
    return compiler


def seed_program_saved_bytes(partition_fn) -> int:
    """Chapter 06's rule (by storage, inputs not counted) on the chapter's seed program."""
    torch.manual_seed(0)
    graphs = capture_graphs(mlp_program(SEED_STEPS), mlp_inputs(32, 64, 16), partition_fn)
    return saved_storage_bytes(graphs["forward"], set(saved_names(graphs["backward"])))[1]


def eager_saved_bytes(fn, inputs) -> int:
    """What eager autograd's pack hook receives, by storage, inputs not counted."""
    args = [t.detach().clone().requires_grad_() for t in inputs]
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        fn(*args)
    kept = {a.untyped_storage().data_ptr() for a in args}
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in packed}
    return sum(n for ptr, n in storages.items() if ptr not in kept)


def aten_names() -> list[str]:
    return [name for name in torch._C._dispatch_get_all_op_names() if name.startswith("aten::")]


def aten_overload(name: str):
    packet, _, overload = name.removeprefix("aten::").partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def core_tagged_names() -> list[str]:
    return [name for name in aten_names() if torch.Tag.core in aten_overload(name).tags]


def aten_calls(gm) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]


def cross_entropy(logits, target):
    return F.nll_loss(F.log_softmax(logits, dim=-1), target)


# --- 0. setup ---------------------------------------------------------------------------------

@backs("notebooks/06_aot.ipynb", "随 PyTorch 一起安装")
def test_networkx_is_a_requirement_of_torch():
    assert any(r.startswith("networkx") for r in importlib.metadata.requires("torch"))


@backs("notebooks/06_aot.ipynb", "用 `functorch.compile` 里的公开入口直接调用 AOTAutograd")
def test_functorch_compile_exports_the_entry_points_the_chapter_uses():
    import functorch.compile as fc
    from torch._dynamo.backends.common import aot_autograd
    assert all(hasattr(fc, name) for name in ("aot_function", "aot_module", "make_boxed_func", "default_partition",
                                              "min_cut_rematerialization_partition"))
    assert callable(aot_autograd)


# --- 1. the principle ---------------------------------------------------------------------------

@backs("notebooks/06_aot.ipynb", "用假张量（fake tensor，只有形状和 dtype，没有数据）把前向函数跑一遍")
def test_the_joint_graph_is_traced_with_fake_tensors():
    seen = {}

    def partition(joint_module, joint_inputs, **kwargs):
        seen["vals"] = [n.meta["val"] for n in joint_module.graph.nodes if n.op == "placeholder"]
        return default_partition(joint_module, joint_inputs, **kwargs)

    aot_function(seed_fn, boxed, partition_fn=partition)(*leaves((4, 8), (8, 8)))
    assert seen["vals"] and all(isinstance(v, FakeTensor) for v in seen["vals"])


@backs("notebooks/06_aot.ipynb", "这张图的输入是前向的输入 `primals_*` 和反向收到的梯度 `tangents_*`")
def test_joint_graph_inputs_are_primals_then_tangents():
    seen = {}

    def partition(joint_module, joint_inputs, **kwargs):
        seen["names"] = [n.name for n in joint_module.graph.nodes if n.op == "placeholder"]
        return default_partition(joint_module, joint_inputs, **kwargs)

    aot_function(seed_fn, boxed, partition_fn=partition)(*leaves((4, 8), (8, 8)))
    assert seen["names"] == ["primals_1", "primals_2", "tangents_1"]


@backs("notebooks/06_aot.ipynb", "输出列表先是前向的结果（损失 `mean`），再是三个梯度")
def test_joint_graph_returns_forward_outputs_then_gradients():
    seen = {}

    def partition(joint_module, joint_inputs, **kwargs):
        seen["outputs"] = list(joint_module.graph.output_node().args[0])
        seen["backward"] = tangent_dependent(joint_module.graph)
        return default_partition(joint_module, joint_inputs, **kwargs)

    aot_function(seed_fn, boxed, partition_fn=partition)(*leaves((4, 8), (8, 8)))
    loss, *grads = seen["outputs"]
    assert loss.target is aten.sum.default and loss not in seen["backward"]
    assert len(grads) == 2 and all(g in seen["backward"] for g in grads)


@backs("notebooks/06_aot.ipynb", "再包进一个 `torch.autograd.Function`")
def test_the_compiled_graphs_are_wrapped_in_an_autograd_function():
    loss = aot_function(seed_fn, boxed)(*leaves((4, 8), (8, 8)))
    assert isinstance(loss.grad_fn, torch.autograd.function.BackwardCFunction)


@backs("notebooks/06_aot.ipynb", "先是前向真正的输出，再是保存的值")
def test_forward_graph_returns_its_outputs_then_what_the_backward_reads():
    calls = []
    aot_function(seed_fn, recording(calls, "forward"), recording(calls, "backward"))(*leaves((4, 8), (8, 8))).backward()
    (_, forward), (_, backward) = calls
    outputs = [n.name for n in forward.graph.output_node().args[0]]
    assert outputs[0] == "sum_1"
    assert outputs[1:] == [n.name for n in backward.graph.nodes if n.op == "placeholder" and "tangents" not in n.name]
    assert {"primals_1", "primals_2"} <= set(outputs[1:])


@backs("notebooks/06_aot.ipynb", "反向编译器要等到第一次 `backward()` 才被调用")
def test_the_backward_compiler_runs_at_the_first_backward():
    calls = []
    loss = aot_function(seed_fn, recording(calls, "forward"), recording(calls, "backward"))(*leaves((4, 8), (8, 8)))
    assert [kind for kind, _ in calls] == ["forward"]
    loss.backward()
    assert [kind for kind, _ in calls] == ["forward", "backward"]


@backs("notebooks/06_aot.ipynb", "交给 `inference_compiler`（没有指定时用前向编译器）")
def test_without_gradients_only_an_inference_graph_is_compiled_by_the_forward_compiler_by_default():
    for needs_grad, requires_grad in [(False, True), (True, False)]:    # no_grad, or no input requires grad
        calls = []
        f = aot_function(seed_fn, recording(calls, "forward"), recording(calls, "backward"))
        x, w = torch.randn(4, 8, requires_grad=requires_grad), torch.randn(8, 8, requires_grad=requires_grad)
        with torch.set_grad_enabled(needs_grad):
            f(x, w)
        assert [kind for kind, _ in calls] == ["forward"]
        assert not any("tangents" in n.name for n in calls[0][1].graph.nodes)


@backs("notebooks/06_aot.ipynb", "标题仍写作 `Forward graph`")
def test_aot_graphs_logs_the_inference_graph_as_a_forward_graph(monkeypatch):
    from torch._functorch._aot_autograd import graph_capture, graph_compile
    logged = []
    for module in (graph_capture, graph_compile):
        monkeypatch.setattr(module.aot_graphs_log, "info", lambda *args: logged.append(" ".join(map(str, args))))

    def titles(needs_grad):
        logged.clear()
        x, w = leaves((4, 8), (8, 8))
        with torch.set_grad_enabled(needs_grad):
            out = aot_function(seed_fn, boxed)(x, w)
        if needs_grad:
            out.backward()
        text = "\n".join(logged)
        return text.count("Forward graph"), text.count("Backward graph")

    assert titles(True) == (1, 1)
    assert titles(False) == (1, 0)


@backs("notebooks/06_aot.ipynb", "只是**一个**节点（`CompiledFunctionBackward`）")
def test_an_aot_compiled_function_is_one_autograd_node():
    loss = aot_function(seed_fn, boxed)(*leaves((4, 8), (8, 8)))
    assert type(loss.grad_fn).__name__ == "CompiledFunctionBackward"
    assert {type(n).__name__ for n, _ in loss.grad_fn.next_functions} == {"AccumulateGrad"}


@backs("notebooks/06_aot.ipynb", "`AccumulateGrad` 是把梯度累加进叶子张量 `.grad` 的节点")
def test_accumulate_grad_holds_the_leaf_it_writes_to():
    x = torch.randn(3, requires_grad=True)
    node = (x * 2).sum().grad_fn.next_functions[0][0].next_functions[0][0]
    assert type(node).__name__ == "AccumulateGrad" and node.variable is x


# --- 2. forward and backward graphs ------------------------------------------------------------

def seed_joint_nodes() -> dict:
    torch.manual_seed(0)
    joint = capture_graphs(mlp_program(SEED_STEPS), mlp_inputs(32, 64, 16))["joint"]
    return {node.name: node for node in joint.graph.nodes}


@backs("notebooks/06_aot.ipynb", "例如前向的 `tanh`，反向的 `mul_7` 直接读它")
def test_in_the_seed_joint_graph_mul_7_reads_tanh():
    nodes = seed_joint_nodes()
    assert nodes["tanh"].target is aten.tanh.default
    assert nodes["tanh"] in nodes["mul_7"].args
    assert nodes["mul_7"] in tangent_dependent(nodes["mul_7"].graph)


@backs("notebooks/06_aot.ipynb", "反向的 `tanh_backward_1` 读的是 `detach_7`")
@backs("notebooks/06_aot.ipynb", "它是 `tanh` 经过两次 `detach`（`detach`、`detach_7`）得到的别名")
def test_in_the_seed_joint_graph_tanh_backward_reads_a_detach_of_a_detach_of_tanh():
    nodes = seed_joint_nodes()
    assert nodes["tanh_backward_1"].target is aten.tanh_backward.default
    read = nodes["tanh_backward_1"].args[1]
    assert read.name == "detach_7" and read.target is aten.detach.default
    assert read.args[0] is nodes["detach"] and nodes["detach"].args[0] is nodes["tanh"]


@backs("notebooks/06_aot.ipynb", "名字里带 `detach` 的值是别的张量的**别名**")
def test_detach_in_the_partitioned_forward_aliases_its_input():
    calls = []
    aot_function(seed_fn, recording(calls, "forward"))(*leaves((4, 8), (8, 8)))
    detaches = [n for n in calls[0][1].graph.nodes if n.target is aten.detach.default]
    assert detaches
    for node in detaches:
        source = node.args[0].meta["val"]
        assert node.meta["val"].untyped_storage()._cdata == source.untyped_storage()._cdata


def glu_forward_and_saved():
    torch.manual_seed(0)
    graphs = capture_graphs(run_glu, glu_inputs())
    return {node.name: node for node in graphs["forward"].graph.nodes}, saved_names(graphs["backward"])


@backs("notebooks/06_aot.ipynb", "`chunk` 在图里是 `split`，取出一半的是它后面的 `getitem`")
@backs("notebooks/06_aot.ipynb", "`getitem` 是 `split` 出来的半个")
def test_chunk_becomes_split_and_the_glu_saves_a_half_of_its_storage():
    nodes, saved = glu_forward_and_saved()
    assert nodes["split"].target is aten.split.Tensor
    assert not any("chunk" in str(node.target) for node in nodes.values())
    half = nodes["getitem"]
    assert "getitem" in saved and half.args[0] is nodes["split"]
    value = half.meta["val"]
    assert value.untyped_storage().nbytes() == 2 * value.numel() * value.element_size()


@backs("notebooks/06_aot.ipynb", "`t` 和 `t_1` 是转置的权重，落在输入的存储上")
def test_the_glu_saves_the_transposed_weights_as_views_of_its_inputs():
    nodes, saved = glu_forward_and_saved()
    inputs = {node.meta["val"].untyped_storage()._cdata for node in nodes.values() if node.op == "placeholder"}
    for name in ("t", "t_1"):
        assert name in saved and nodes[name].target is aten.t.default
        assert nodes[name].args[0].op == "placeholder"
        assert nodes[name].meta["val"].untyped_storage()._cdata in inputs


@backs("notebooks/06_aot.ipynb", "参数和缓冲被\"提升\"为图的输入 `primals_*`")
def test_aot_module_lifts_parameters_and_buffers_to_graph_inputs():
    calls = []
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    aot_module(model, recording(calls, "forward"), recording(calls, "backward"))(torch.randn(2, 4)).sum().backward()
    inputs = [n.name for n in calls[0][1].graph.nodes if n.op == "placeholder"]
    lifted = len(list(model.parameters())) + len(list(model.buffers()))
    assert len(inputs) == lifted + 1 and all(name.startswith("primals_") for name in inputs)
    assert all(p.grad is not None for p in model.parameters())


# --- 3. eager autograd --------------------------------------------------------------------------

def saved_attributes(node) -> set[str]:
    return {name for name in dir(node) if name.startswith("_saved_")}


@backs("notebooks/06_aot.ipynb", "`sum` 只记形状（`_saved_self_sym_sizes`）")
def test_sum_saves_only_the_input_shape():
    x = torch.randn(3, requires_grad=True)
    assert saved_attributes(x.sum().grad_fn) == {"_saved_self_sym_sizes"}


@backs("notebooks/06_aot.ipynb", "保存自己的**输出**（`_saved_result`")
def test_tanh_and_sigmoid_save_their_outputs():
    x = torch.randn(3, requires_grad=True)
    for out in (torch.tanh(x), torch.sigmoid(x)):
        assert saved_attributes(out.grad_fn) == {"_saved_result"}
        assert out.grad_fn._saved_result.equal(out)


@backs("notebooks/06_aot.ipynb", "`mul` 保存两个输入，`mm` 保存两个输入")
def test_mul_and_mm_save_both_inputs():
    a, b = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
    assert {"_saved_self", "_saved_other"} <= saved_attributes((a * b).grad_fn)
    mm = (a @ b).grad_fn
    assert {"_saved_self", "_saved_mat2"} <= saved_attributes(mm) and mm._saved_self.equal(a)


@backs("notebooks/06_aot.ipynb", "加法不保存任何张量（只记下标量 `alpha`：`_saved_alpha`）")
def test_add_saves_only_its_scalar_alpha():
    a, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    assert saved_attributes((a + b).grad_fn) == {"_saved_alpha"}
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        a + b
    assert packed == []


@backs("notebooks/06_aot.ipynb", "最后一行另算的 `x + 1` 是加法")
def test_adding_a_python_number_is_an_add_backward_that_saves_only_alpha():
    x = torch.randn(4, 8, requires_grad=True)
    node = (x + 1).grad_fn
    assert type(node).__name__ == "AddBackward0" and saved_attributes(node) == {"_saved_alpha"}


@backs("notebooks/06_aot.ipynb", "但它**不经过** `pack`")
def test_a_wrapped_number_is_saved_without_the_pack_hook():
    a = torch.randn(3, requires_grad=True)
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        out = a * 2.0
    assert out.grad_fn._saved_other.dim() == 0 and packed == []


@backs("notebooks/06_aot.ipynb", "它在 `derivatives.yaml` 里写的是 `silu_backward`")
def test_derivatives_yaml_gives_silu_the_silu_backward_formula():
    text = (Path(torchgen.__file__).parent / "packaged/autograd/derivatives.yaml").read_text()
    entry = text.split("- name: silu(Tensor self) -> Tensor", 1)[1].split("- name:", 1)[0]
    assert "silu_backward" in entry


@backs("notebooks/06_aot.ipynb", "does not currently support double backward")
def test_double_backward_through_an_aot_compiled_function_raises():
    t = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (grad,) = torch.autograd.grad(aot_function(lambda v: (v ** 3).sum(), boxed)(t), t, create_graph=True)
    with pytest.raises(RuntimeError, match="torch.compile with aot_autograd does not currently support double backward"):
        torch.autograd.grad(grad.sum(), t)


@backs("notebooks/06_aot.ipynb", "自己不检查形状（上面的 `average`）")
def test_aot_function_compiles_once_and_keeps_shapes_as_constants():
    calls = []
    average = aot_function(lambda t: t.sum() / t.shape[0], recording(calls, "forward"))
    assert average(torch.ones(4, requires_grad=True)).item() == 1.0
    assert average(torch.ones(8, requires_grad=True)).item() == 2.0     # traced for 4 elements, not re-traced
    assert len(calls) == 1


@backs("notebooks/06_aot.ipynb", "依赖数据的控制流追踪不了")
def test_aot_function_cannot_trace_data_dependent_control_flow():
    def branchy(t):
        return (t * 2).sum() if t.sum() > 0 else (t * 3).sum()

    with pytest.raises(Exception, match="_local_scalar_dense"):
        aot_function(branchy, boxed)(torch.ones(3, requires_grad=True))


# --- 4. joint optimisations ---------------------------------------------------------------------

@backs("notebooks/06_aot.ipynb", "（Inductor 用的分区器）")
def test_inductor_partitions_with_min_cut_by_default():
    from torch._inductor import compile_fx
    from torch._inductor import config as inductor_config
    assert inductor_config.custom_partitioner_fn is None
    assert "min_cut_rematerialization_partition(" in inspect.getsource(compile_fx.partition_fn)


@backs("notebooks/06_aot.ipynb", "内部用 networkx 求最小割")
def test_the_min_cut_partitioner_solves_a_networkx_min_cut():
    source = inspect.getsource(partitioners.solve_min_cut)
    assert "nx.DiGraph()" in source and "nx.minimum_cut" in source


@backs("notebooks/06_aot.ipynb", "每个前向值拆成两个点 `v_in → v_out`")
def test_min_cut_splits_each_value_into_in_and_out_nodes_between_source_and_sink():
    source = inspect.getsource(partitioners.solve_min_cut)
    assert 'nx_graph.add_edge(node.name + "_in", node.name + "_out", capacity=weight)' in source
    assert '"source",' in source and '"sink",' in source


@backs("notebooks/06_aot.ipynb", "默认只允许重算一张**白名单**上的算子")
def test_min_cut_recomputes_only_allowlisted_ops_and_mm_is_not_one():
    assert functorch_config.ban_recompute_not_in_allowlist is True
    ops = partitioners.get_default_op_list()
    assert aten.mm not in ops.recomputable_ops
    assert {aten.sigmoid, aten.tanh, aten.t} <= set(ops.recomputable_ops)


@backs("notebooks/06_aot.ipynb", "`torch._functorch.config.activation_memory_budget`（默认 1.0）")
def test_activation_memory_budget_defaults_to_one():
    assert functorch_config.activation_memory_budget == 1.0


@backs("notebooks/06_aot.ipynb", "0 表示只保存输入")
def test_budget_zero_saves_only_the_inputs():
    assert "if memory_budget == 0:\n        return node_info.inputs" in inspect.getsource(partitioners.choose_saved_values_set)
    with functorch_config.patch(activation_memory_budget=0.0):
        assert seed_program_saved_bytes(min_cut_rematerialization_partition) == 0


@backs("notebooks/06_aot.ipynb", "1 表示 budget 为 1.0 时最小割选出的那组值")
def test_the_budget_is_normalised_between_the_inputs_and_the_budget_one_min_cut():
    source = inspect.getsource(partitioners.choose_saved_values_set)
    assert "min_act_size = estimate_activations_size(node_info.inputs)" in source
    assert "max_act_size = estimate_activations_size(runtime_optimized_saved_values)" in source
    assert "(estimate_activations_size(activations) - min_act_size) / (\n            max_act_size - min_act_size" in source


@backs("notebooks/06_aot.ipynb", "每一档都在 budget 之下")
def test_on_the_seed_program_each_budget_saves_less_than_its_fraction():
    at_one = seed_program_saved_bytes(min_cut_rematerialization_partition)
    for budget in (0.5, 0.2, 0.1):
        with functorch_config.patch(activation_memory_budget=budget):
            assert seed_program_saved_bytes(min_cut_rematerialization_partition) < budget * at_one


@backs("notebooks/06_aot.ipynb", "它本来就比默认分区器保存得少")
def test_on_the_seed_program_min_cut_saves_less_than_default_partition():
    assert seed_program_saved_bytes(min_cut_rematerialization_partition) < seed_program_saved_bytes(default_partition)


@backs("notebooks/06_aot.ipynb", "在这个程序上，两者的 `held_bytes` 相同")
def test_on_the_seed_program_default_partition_saves_what_eager_autograd_saves():
    torch.manual_seed(0)
    inputs = mlp_inputs(32, 64, 16)
    assert seed_program_saved_bytes(default_partition) == eager_saved_bytes(mlp_program(SEED_STEPS), inputs)


@backs("notebooks/06_aot.ipynb", "估计的重算时间（按 FLOP 数估计）")
def test_the_budget_solver_estimates_runtime_by_flops():
    assert functorch_config.activation_memory_budget_runtime_estimator == "flops"


@backs("notebooks/06_aot.ipynb", "**0-1 背包**（默认求解器 `dp`）")
def test_below_budget_one_a_dp_knapsack_chooses():
    assert functorch_config.activation_memory_budget_solver == "dp"
    assert "get_saved_values_knapsack" in inspect.getsource(partitioners.choose_saved_values_set)


@backs("notebooks/06_aot.ipynb", "字节数乘上 1.1 的（距离）次方")
def test_min_cut_weights_grow_with_distance_from_the_backward():
    assert "mem_sz * (1.1 ** max(min(node.dist_from_bw, 100), 1))" in inspect.getsource(partitioners.solve_min_cut)


@backs("notebooks/06_aot.ipynb", "保存的代价按两倍算")
def test_min_cut_doubles_the_weight_of_values_that_would_fuse_away():
    source = inspect.getsource(partitioners.solve_min_cut)
    assert "if is_materialized(node):\n            return mem_sz, None\n        else:\n            return mem_sz * 2, None" in source


@backs("notebooks/06_aot.ipynb", "随机数算子（`native_dropout`、`rand_like`……）不在其中")
def test_random_ops_are_not_recomputable():
    ops = partitioners.get_default_op_list()
    assert {aten.native_dropout, aten.rand_like} <= set(ops.random_ops)
    assert not {aten.native_dropout, aten.rand_like} & set(ops.recomputable_ops)


@backs("notebooks/06_aot.ipynb", "输出比输入小 4 倍以上的归约也不重算")
def test_reductions_that_shrink_fourfold_are_not_recomputed():
    assert functorch_config.ban_recompute_reductions is True
    assert "if output_size * 4 < input_tensors_size:" in inspect.getsource(partitioners.solve_min_cut)


@backs("notebooks/06_aot.ipynb", "torch.cuda.max_memory_allocated()")
def test_cuda_reports_peak_allocated_memory():
    assert callable(torch.cuda.max_memory_allocated)


@backs("notebooks/06_aot.ipynb", "在 toychip 上不启动内核")
def test_on_the_chip_views_launch_nothing_and_reductions_are_kernels_of_their_own():
    from toychip.fusion import kind_of
    assert {kind_of(op) for op in (aten.t.default, aten.detach.default, aten.expand.default)} == {"view"}
    assert {kind_of(op) for op in (aten._softmax.default, aten.sum.dim_IntList)} == {"reduction"}


@backs("notebooks/06_aot.ipynb", "编译器按节点的 `meta['val']`（记着形状和 dtype 的张量）决定能不能把它和邻居融合")
def test_the_chip_fuses_a_pointwise_node_only_when_it_has_meta_val():
    from toychip.compiler import compile_graph

    def launches(without_val: bool) -> int:
        gm = make_fx(lambda x: torch.exp(x * 2))(torch.randn(4, 4).to("toychip"))
        for node in gm.graph.nodes:
            if without_val and node.target is aten.mul.Tensor:
                del node.meta["val"]
        return compile_graph(gm, [], "inference").launches

    assert (launches(without_val=False), launches(without_val=True)) == (1, 2)


@backs("notebooks/06_aot.ipynb", "算力只有千分之一、启动开销和带宽不变")
def test_the_compute_bound_chip_has_a_thousandth_of_the_arithmetic():
    import toychip
    slow, default = compute_bound_chip(), toychip.DEFAULT_SPEC
    assert slow.flops_per_us * 1000 == default.flops_per_us
    assert (slow.launch_us, slow.mem_bytes_per_us) == (default.launch_us, default.mem_bytes_per_us)


@backs("notebooks/06_aot.ipynb", "同一种分区在两块芯片上的启动次数和内存一样，时间不一样")
def test_a_chip_spec_changes_the_time_of_a_step_not_its_launches_or_memory():
    torch.manual_seed(0)
    inputs = mlp_inputs(16, 128, 16)
    default_chip, slow_chip = (chip_step(mlp_program(SEED_STEPS), inputs, default_partition, spec=spec)
                               for spec in (None, compute_bound_chip()))
    assert (default_chip["launches"], default_chip["peak_bytes"]) == (slow_chip["launches"], slow_chip["peak_bytes"])
    assert default_chip["time_us"] < slow_chip["time_us"]


@backs("notebooks/06_aot.ipynb", "`torch._functorch.config` 里的 `ban_recompute_*` 开关")
def test_min_cut_bans_recomputation_through_config_switches_that_default_to_on():
    switches = ["ban_recompute_used_far_apart", "ban_recompute_long_fusible_chains",
                "ban_recompute_materialized_backward", "ban_recompute_not_in_allowlist", "ban_recompute_reductions"]
    assert all(getattr(functorch_config, name) is True for name in switches)
    source = inspect.getsource(partitioners.choose_saved_values_set)
    assert all(f"config.{name}" in source for name in switches)


@backs("notebooks/06_aot.ipynb", "`meta['partitioner_tag']` 里记着它来自前向（`'is_forward'`）还是反向（`'is_backward'`）")
def test_joint_graph_nodes_are_tagged_forward_or_backward():
    graph = capture_graphs(seed_fn, leaves((4, 8), (8, 8)))["joint"].graph
    calls = [n for n in graph.nodes if n.op == "call_function"]
    assert {n.meta["partitioner_tag"] for n in calls} == {"is_forward", "is_backward"}
    assert all(n.meta["partitioner_tag"] == "is_backward" for n in calls if n in tangent_dependent(graph))
    assert next(n for n in calls if n.target is aten.mm.default).meta["partitioner_tag"] == "is_forward"


def copy_tanh_before_its_backward_use(keep_tag: bool):
    """A partitioner that recomputes ``tanh`` next to ``tanh_backward``, copying the tag or not."""
    def partition(joint_module, joint_inputs, **kwargs):
        graph = joint_module.graph
        tanh = next(n for n in graph.nodes if n.target is aten.tanh.default)
        use = next(n for n in graph.nodes if n.target is aten.tanh_backward.default)
        with graph.inserting_before(use):
            copy = graph.node_copy(tanh)
        if not keep_tag:
            del copy.meta["partitioner_tag"]
        use.args = (use.args[0], copy)
        joint_module.recompile()
        return default_partition(joint_module, joint_inputs, **kwargs)
    return partition


@backs("notebooks/06_aot.ipynb", "联合图里直到最后一个 `'is_forward'` 节点为止是前向")
def test_default_partition_takes_the_joint_graph_up_to_the_last_is_forward_node_as_the_forward():
    assert "if _has_tag_is_forward(node) or _is_primal(node)" in inspect.getsource(partitioners.default_partition)
    capture_graphs(seed_fn, leaves((4, 8), (8, 8)), copy_tanh_before_its_backward_use(keep_tag=False))
    with pytest.raises(AssertionError):  # the copy's tag drags the backward before it into the forward
        capture_graphs(seed_fn, leaves((4, 8), (8, 8)), copy_tanh_before_its_backward_use(keep_tag=True))


# --- 5. functionalization, decompositions, calling convention ---------------------------------

@backs("notebooks/06_aot.ipynb", "对输入 `buffer` 的修改变成了图末尾的一个 `copy_`")
def test_functionalize_turns_an_input_mutation_into_a_final_copy():
    def mutating(x, buffer):
        y = x.clone()
        y.add_(1)
        buffer.add_(y)
        return y.relu()

    gm = make_fx(torch.func.functionalize(mutating, remove="mutations_and_views"))(torch.randn(3), torch.zeros(3))
    calls = aten_calls(gm)
    assert calls[-1] == "aten.copy_.default" and "aten.add_.Tensor" not in calls


@backs("notebooks/06_aot.ipynb", "`disable_functionalization` 默认为 `False`")
def test_aot_function_functionalizes_by_default():
    assert inspect.signature(aot_function).parameters["disable_functionalization"].default is False


def mutating_step(x, buffer):
    buffer.add_(1)
    return x * 2


@backs("notebooks/06_aot.ipynb", "在编译好的函数**外面**的运行时包装（runtime wrapper）里完成 `copy_`")
def test_by_default_input_mutations_happen_outside_the_compiled_graph():
    calls = []
    buffer = torch.zeros(3)
    aot_function(mutating_step, recording(calls, "forward"))(torch.randn(3, requires_grad=True), buffer)
    assert buffer.tolist() == [1.0, 1.0, 1.0]
    assert "aten.copy_.default" not in aten_calls(calls[0][1])


@backs("notebooks/06_aot.ipynb", "名字里写着 inference，但在 2.13 里它不只管推理图")
def test_keep_inference_input_mutations_keeps_the_copy_of_an_input_that_needs_no_grad_in_training_graphs_too():
    def graph_calls(needs_grad, keep):
        calls = []
        f = aot_function(mutating_step, recording(calls, "forward"), keep_inference_input_mutations=keep)
        with torch.set_grad_enabled(needs_grad):
            f(torch.randn(3, requires_grad=True), torch.zeros(3))
        return aten_calls(calls[0][1])

    assert "aten.copy_.default" in graph_calls(needs_grad=False, keep=True)
    assert "aten.copy_.default" in graph_calls(needs_grad=True, keep=True)
    assert "aten.copy_.default" not in graph_calls(needs_grad=False, keep=False)


@backs("notebooks/06_aot.ipynb", "三千多个重载")
def test_the_dispatcher_registers_three_thousand_odd_aten_overloads():
    assert 3000 <= len(aten_names()) < 4000


@backs("notebooks/06_aot.ipynb", "一千五百多个名字")
def test_those_overloads_have_fifteen_hundred_odd_names():
    assert 1500 <= len({name.partition(".")[0] for name in aten_names()}) < 1600


@backs("notebooks/06_aot.ipynb", "一百六十多个名字（一百九十多个重载）")
def test_core_aten_is_a_hundred_sixty_odd_names_and_a_hundred_ninety_odd_overloads():
    tagged = core_tagged_names()
    assert 190 <= len(tagged) < 200
    assert 160 <= len({name.partition(".")[0] for name in tagged}) < 170


@backs("notebooks/06_aot.ipynb", "数的则是表里**有分解**的重载（九百多个")
def test_core_aten_decompositions_has_nine_hundred_odd_entries():
    assert 900 <= len(core_aten_decompositions()) < 1000


@backs("notebooks/06_aot.ipynb", "`silu` 被分解成 `x * sigmoid(x)`；`sigmoid` 本身是核心 ATen 算子，不再分解")
def test_core_decomposes_silu_into_sigmoid_and_mul_and_keeps_sigmoid():
    gm = make_fx(lambda t: F.silu(t), decomposition_table=core_aten_decompositions())(torch.randn(4))
    assert sorted(set(aten_calls(gm))) == ["aten.mul.Tensor", "aten.sigmoid.default"]
    assert torch.Tag.core in aten.sigmoid.default.tags and aten.sigmoid.default not in core_aten_decompositions()


@backs("notebooks/06_aot.ipynb", "`_log_softmax` 带 core 标签，两张表都保留它")
def test_log_softmax_is_a_core_op_that_core_aten_keeps():
    assert torch.Tag.core in aten._log_softmax.default.tags
    assert aten._log_softmax.default not in core_aten_decompositions()


@backs("lib/toychip/compiler.py", "Core ATen keeps ``_log_softmax`` (a core op)")
def test_core_aten_keeps_log_softmax_as_the_toychip_docstring_says():
    assert torch.Tag.core in aten._log_softmax.default.tags
    assert aten._log_softmax.default not in core_aten_decompositions()


def nll_loss_forward_calls() -> list[str]:
    logits, target = torch.randn(8, 10), torch.randint(0, 10, (8,))
    gm = make_fx(cross_entropy, decomposition_table=core_aten_decompositions())(logits, target)
    calls = aten_calls(gm)
    assert calls[0] == "aten._log_softmax.default" and "aten.nll_loss_forward.default" not in calls
    return calls[1:]


@backs("notebooks/06_aot.ipynb", "核心表把它拆成 15 次 ATen 调用")
def test_core_aten_splits_nll_loss_forward_into_fifteen_calls():
    assert torch.Tag.core not in aten.nll_loss_forward.default.tags
    assert len(nll_loss_forward_calls()) == 15


@backs("lib/toychip/compiler.py", "15 ATen calls")
def test_core_aten_splits_nll_loss_forward_into_fifteen_calls_as_the_toychip_docstring_says():
    assert len(nll_loss_forward_calls()) == 15


@backs("notebooks/06_aot.ipynb", "反向图里却出现了 `silu_backward`")
def test_decompositions_apply_below_autograd_so_the_backward_keeps_silu_backward():
    calls = []
    f = aot_function(F.silu, recording(calls, "forward"), recording(calls, "backward"),
                     decompositions=get_decompositions([aten.silu]))
    f(torch.randn(4, requires_grad=True)).sum().backward()
    (_, forward), (_, backward) = calls
    assert "aten.silu.default" not in aten_calls(forward)
    assert "aten.silu_backward.default" in aten_calls(backward)


@backs("notebooks/06_aot.ipynb", "`core_aten_decompositions()` 里就有它们的分解")
def test_core_aten_decomposes_the_backward_ops():
    core = core_aten_decompositions()
    assert {aten.silu_backward.default, aten.mish_backward.default, aten.gelu_backward.default} <= set(core)


@backs("notebooks/06_aot.ipynb", "忘了包装也能运行，但会收到警告")
def test_an_unboxed_compiler_runs_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        aot_function(lambda a: (a * 2).sum(), lambda gm, ex: gm.forward)(torch.randn(3, requires_grad=True)).backward()
    assert any("doesn't take boxed arguments" in str(w.message) for w in caught)


@backs("notebooks/06_aot.ipynb", "2.13 里有 `static_lifetime_input_indices`")
def test_partitioners_get_static_lifetime_input_indices():
    seen = {}

    def partition(joint_module, joint_inputs, **kwargs):
        seen.update(kwargs)
        return default_partition(joint_module, joint_inputs, **kwargs)

    aot_function(lambda a: (a * 2).sum(), boxed, partition_fn=partition)(torch.randn(3, requires_grad=True))
    assert set(seen) == {"num_fwd_outputs", "static_lifetime_input_indices"}


@backs("notebooks/06_aot.ipynb", "编译好的图挂在被编译函数的代码对象上")
def test_dynamo_keeps_compiled_entries_on_the_code_object():
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    def plus_one(t):
        return t + 1

    torch._dynamo.reset()
    try:
        torch.compile(plus_one, backend="eager")(torch.randn(3))
        assert len(_debug_get_cache_entry_list(plus_one.__code__)) == 1
    finally:
        torch._dynamo.reset()


@backs("notebooks/06_aot.ipynb", "**不**检查 AOTAutograd 的配置")
def test_dynamo_does_not_guard_on_the_activation_memory_budget():
    from torch._dynamo.backends.common import aot_autograd
    partitions = []

    def counting_partition(joint_module, joint_inputs, **kwargs):
        partitions.append(functorch_config.activation_memory_budget)
        return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)

    torch._dynamo.reset()
    try:
        compiled = torch.compile(seed_fn, backend=aot_autograd(fw_compiler=boxed, partition_fn=counting_partition))
        x, w = leaves((4, 8), (8, 8))
        compiled(x, w).backward()
        with functorch_config.patch(activation_memory_budget=0.0):
            compiled(x, w).backward()
        assert partitions == [1.0]
    finally:
        torch._dynamo.reset()
