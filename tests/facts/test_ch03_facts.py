"""Facts about torch 2.13 that chapter 03 (TorchFX) relies on, each pinned to its sentence."""
import importlib
import importlib.util
import inspect
import operator
import sys
import warnings
from importlib import metadata
from pathlib import Path

import pytest
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import ShapeProp

from course_models.ch03_models import MixedActivations, ModelWithDropout, SeedModel, pointwise_chains
from facts import backs, function_source

# Importing Inductor (AOTAutograd compiles do) runs torch.jit.script_method inside torch, which warns;
# that is not what these tests check.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
TORCH_ROOT = Path(torch.__file__).parent
SIX_OPCODES = {"placeholder", "get_attr", "call_function", "call_method", "call_module", "output"}


def branchy(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def shape_branchy(x):
    if x.shape[0] > 2:
        return x * 2
    return x - 1


class Scaled(nn.Module):
    """One node of every opcode: a placeholder, a get_attr, a module, a function, a method, the output."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return torch.mul(self.linear(x), self.scale).relu()


def nodes_by_op(gm: fx.GraphModule) -> dict:
    return {node.op: node for node in gm.graph.nodes}


def wrapped_in_a_notebook():
    """``fx.wrap("branchy")`` run at the top level of a module named ``__main__``, as in a notebook."""
    namespace = {"__name__": "__main__"}
    exec(
        "import torch.fx as fx\n"
        "def branchy(x):\n"
        "    if x.sum() > 0:\n"
        "        return x * 2\n"
        "    return x - 1\n"
        "fx.wrap('branchy')\n"
        "def uses_branchy(x):\n"
        "    return branchy(x + 1) * 3\n",
        namespace)
    return namespace


def deprecation_warnings(capture) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capture()
    return [w for w in caught if w.category is DeprecationWarning]


# Section 0 and 1: what FX is, and who uses its graphs

@backs("notebooks/03_fx.ipynb", "全都是 FX 图")
def test_dynamo_and_aot_autograd_hand_their_compilers_graph_modules():
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    received = {}

    def recorder(kind):
        def compiler(gm, example_inputs):
            received[kind] = gm
            return make_boxed_func(gm.forward)
        return compiler

    def dynamo_backend(gm, example_inputs):
        received["dynamo"] = gm
        return aot_autograd(fw_compiler=recorder("forward"), bw_compiler=recorder("backward"))(gm, example_inputs)

    torch._dynamo.reset()
    try:
        torch.compile(lambda x: torch.sin(x) * 2, backend=dynamo_backend)(torch.randn(3, requires_grad=True)).sum().backward()
    finally:
        torch._dynamo.reset()
    assert set(received) == {"dynamo", "forward", "backward"}
    assert all(isinstance(gm, fx.GraphModule) for gm in received.values())


@backs("notebooks/03_fx.ipynb", "Inductor 接收的输入")
def test_inductor_compiles_a_graph_module():
    path = TORCH_ROOT / "_inductor" / "compile_fx.py"
    assert function_source(path, "compile_fx").split("(", 1)[1].lstrip().startswith("model_: GraphModule,")
    assert "\nfrom torch.fx import GraphModule\n" in path.read_text(encoding="utf-8")


@backs("notebooks/03_fx.ipynb", "文档说整个工具包由三个部件组成")
def test_fx_docs_name_three_components_and_python_to_python():
    doc = " ".join(fx.__doc__.split())
    assert "three main components: a **symbolic tracer,** an **intermediate representation**, and **Python code generation**" in doc
    assert "Python-to-Python" in doc


@backs("notebooks/03_fx.ipynb", "`GraphModule` 就是个 `nn.Module`")
def test_a_graph_module_is_an_nn_module_with_the_same_state_dict():
    model = SeedModel()
    gm = fx.symbolic_trace(model)
    assert isinstance(gm, nn.Module)
    assert gm.state_dict().keys() == model.state_dict().keys()


@backs("notebooks/03_fx.ipynb", "量化（quantization）、剪枝")
def test_quantization_and_pruning_trace_with_fx():
    from torch.ao.pruning._experimental.pruner.base_structured_sparsifier import BaseStructuredSparsifier
    from torch.ao.quantization.fx.tracer import QuantizationTracer

    assert issubclass(QuantizationTracer, fx.Tracer)
    assert "symbolic_trace(self.model)" in inspect.getsource(BaseStructuredSparsifier)


@backs("notebooks/03_fx.ipynb", "代码生成器会在一个中间值最后一次被使用后立即释放它")
def test_generated_code_frees_each_value_after_its_last_use():
    lines = fx.symbolic_trace(SeedModel()).code.splitlines()
    assert any(line.strip() == "linear1 = self.linear1(x);  x = None" for line in lines)
    assert any(line.strip() == "relu = torch.relu(linear1);  linear1 = None" for line in lines)


# Section 2: symbolic tracing

@backs("notebooks/03_fx.ipynb", "真的调用一次 `model.forward`")
def test_symbolic_trace_runs_forward_once_with_proxies():
    seen = []

    class Recording(nn.Module):
        def forward(self, x):
            seen.append(type(x))
            return x + 1

    fx.symbolic_trace(Recording())
    assert seen == [fx.Proxy]


@backs("notebooks/03_fx.ipynb", "并返回一个新的 Proxy")
def test_an_operation_on_a_proxy_adds_a_node_and_returns_a_proxy():
    graph = fx.Graph()
    x = fx.Proxy(graph.placeholder("x"))
    y = torch.relu(x * 2 + 1)
    assert isinstance(y, fx.Proxy)
    assert [node.target for node in graph.nodes] == ["x", operator.mul, operator.add, torch.relu]


@backs("notebooks/03_fx.ipynb", "于是抛出 `torch.fx.proxy.TraceError`")
def test_a_value_dependent_branch_raises_trace_error():
    with pytest.raises(fx.proxy.TraceError, match="cannot be used as inputs to control flow"):
        fx.symbolic_trace(branchy)


@backs("notebooks/03_fx.ipynb", "依赖**形状**的控制流在 `symbolic_trace` 中同样会失败")
def test_a_shape_dependent_branch_raises_trace_error_too():
    with pytest.raises(fx.proxy.TraceError):
        fx.symbolic_trace(shape_branchy)


@backs("notebooks/03_fx.ipynb", "依赖数值的分支则在 Dynamo 中会产生图中断")
def test_dynamo_specializes_a_shape_branch_and_breaks_on_a_value_branch():
    torch._dynamo.reset()
    try:
        shape = torch._dynamo.explain(shape_branchy)(torch.randn(3))
        value = torch._dynamo.explain(branchy)(torch.randn(3))
    finally:
        torch._dynamo.reset()
    assert (shape.graph_count, shape.graph_break_count) == (1, 0)
    assert value.graph_break_count == 1


@backs("notebooks/03_fx.ipynb", "必须在模块（这里是 notebook）的顶层调用")
def test_wrap_must_be_called_at_the_top_level_of_a_module():
    with pytest.raises(NotImplementedError, match="top level of a module"):
        fx.wrap("branchy")


@backs("notebooks/03_fx.ipynb", "整体记成一个 `call_function` 节点")
def test_a_wrapped_function_is_one_call_function_node():
    namespace = wrapped_in_a_notebook()
    gm = fx.symbolic_trace(namespace["uses_branchy"])
    calls = [node for node in gm.graph.nodes if node.target is namespace["branchy"]]
    assert [node.op for node in calls] == ["call_function"]


@backs("notebooks/03_fx.ipynb", "模块名.函数名")
def test_a_global_outside_torch_is_named_by_module_and_function():
    gm = fx.symbolic_trace(wrapped_in_a_notebook()["uses_branchy"])
    assert "branchy = __main___branchy(add)" in gm.code


@backs("notebooks/03_fx.ipynb", "再次追踪这个 `GraphModule` 时，`branchy` 仍然是叶子")
def test_the_wrap_line_keeps_a_wrapped_function_a_leaf_when_retraced():
    gm = fx.symbolic_trace(wrapped_in_a_notebook()["uses_branchy"])
    assert 'wrap("__main___branchy")' in gm.code
    assert any(node.op == "call_function" and node.name == "branchy" for node in fx.symbolic_trace(gm).graph.nodes)
    for node in gm.graph.nodes:
        node.meta.pop("is_wrapped", None)
    unmarked = fx.GraphModule(gm, gm.graph)
    assert "wrap(" not in unmarked.code
    with pytest.raises(fx.proxy.TraceError):
        fx.symbolic_trace(unmarked)


@backs("notebooks/03_fx.ipynb", "FX 还会插入一个 `torch._assert`")
def test_a_concrete_bool_is_specialized_with_an_assert():
    def scaled(x, double):
        if double:
            return x * 2
        return x - 1

    gm = fx.symbolic_trace(scaled, concrete_args={"double": True})
    assert any(node.target is torch._assert for node in gm.graph.nodes)
    with pytest.raises(AssertionError, match="specialized to have value True"):
        gm(torch.ones(2), False)


# Section 3: the IR

@backs("notebooks/03_fx.ipynb", "只有六种")
def test_there_are_six_opcodes_each_with_its_interpreter_method():
    from torch.fx.node import _legal_ops

    assert set(_legal_ops) == SIX_OPCODES | {"root"}  # "root": a legacy name no graph uses
    assert all(callable(getattr(fx.Interpreter, op)) for op in SIX_OPCODES)
    assert not hasattr(fx.Interpreter, "root")


@backs("notebooks/03_fx.ipynb", "`node.target` 是什么")
def test_each_opcode_has_its_kind_of_target():
    nodes = nodes_by_op(fx.symbolic_trace(Scaled()))
    assert nodes.keys() == SIX_OPCODES
    assert nodes["placeholder"].target == "x"
    assert nodes["get_attr"].target == "scale"
    assert nodes["call_function"].target is torch.mul
    assert nodes["call_method"].target == "relu"
    assert nodes["call_module"].target == "linear"
    assert nodes["output"].target == "output"


@backs("notebooks/03_fx.ipynb", "一个以使用者节点为键的字典")
def test_users_is_a_dict_keyed_by_the_user_nodes():
    gm = fx.symbolic_trace(MixedActivations())
    relu = next(node for node in gm.graph.nodes if node.name == "relu")
    assert type(relu.users) is dict
    assert [user.name for user in relu.users] == ["fc2", "relu_1"]


def installed_requirements(distribution: str, extra: str = "") -> set[str]:
    """Every distribution installing ``distribution`` (with ``extra``) pulls in, by name."""
    names, todo = set(), [(distribution, extra)]
    while todo:
        name, wanted_extra = todo.pop()
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in map(Requirement, requires):
            if requirement.marker and not requirement.marker.evaluate({"extra": wanted_extra}):
                continue
            if canonicalize_name(requirement.name) not in names:
                names.add(canonicalize_name(requirement.name))
                todo.append((requirement.name, ""))
    return names


@backs("notebooks/03_fx.ipynb", "它依赖第三方包 `tabulate`，课程的基本安装（`./course open` 装的包）里没有它")
def test_print_tabular_needs_tabulate_which_only_the_site_extra_installs():
    assert "tabulate" not in installed_requirements("pytorch-compiler-course")
    assert "tabulate" in installed_requirements("pytorch-compiler-course", "site") or importlib.util.find_spec("tabulate") is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "tabulate", None)  # import tabulate now raises ImportError
        with pytest.raises(ImportError):
            fx.symbolic_trace(SeedModel()).graph.print_tabular()


@backs("notebooks/03_fx.ipynb", "同样是 ReLU，在图里却有三种 `op`")
def test_four_relu_spellings_trace_to_three_opcodes():
    gm = fx.symbolic_trace(MixedActivations())
    relus = {(node.op, node.target) for node in gm.graph.nodes if node.op != "call_module" and "relu" in node.name}
    assert relus == {("call_function", torch.relu), ("call_function", F.relu), ("call_method", "relu")}
    assert torch.relu is not F.relu
    assert isinstance(gm.get_submodule("act"), nn.ReLU)


@backs("notebooks/03_fx.ipynb", "目标是 Python 的 `operator.add`")
def test_plus_is_recorded_as_operator_add():
    gm = fx.symbolic_trace(MixedActivations())
    assert [node.target for node in gm.graph.nodes if node.name == "add"] == [operator.add]


@backs("notebooks/03_fx.ipynb", "而不是运行生成的 Python 代码")
def test_the_interpreter_runs_the_graph_and_recompile_renews_the_code():
    gm = fx.symbolic_trace(SeedModel())
    relu = next(node for node in gm.graph.nodes if node.target is torch.relu)
    relu.target = torch.tanh  # edited, not yet recompiled
    x = torch.randn(2, 10)
    expected = gm.linear2(torch.tanh(gm.linear1(x)))
    assert "torch.relu" in gm.code
    assert torch.allclose(fx.Interpreter(gm).run(x), expected)
    assert not torch.allclose(gm(x), expected)


@backs("notebooks/03_fx.ipynb", "根据改过的图重新生成 `forward` 代码")
def test_recompile_regenerates_forward_from_the_edited_graph():
    gm = fx.symbolic_trace(SeedModel())
    next(node for node in gm.graph.nodes if node.target is torch.relu).target = torch.tanh
    assert "torch.relu" in gm.code
    gm.recompile()
    assert "torch.tanh" in gm.code and "torch.relu" not in gm.code


@backs("notebooks/03_fx.ipynb", 'node.meta["tensor_meta"]')
def test_shape_prop_is_an_interpreter_that_writes_tensor_meta():
    gm = fx.symbolic_trace(MixedActivations())
    assert issubclass(ShapeProp, fx.Interpreter)
    ShapeProp(gm).propagate(torch.randn(2, 8))
    fc3 = next(node for node in gm.graph.nodes if node.name == "fc3")
    assert (tuple(fc3.meta["tensor_meta"].shape), fc3.meta["tensor_meta"].dtype) == ((2, 4), torch.float32)


@backs("notebooks/03_fx.ipynb", "符号追踪得到的图本来不知道任何形状")
def test_symbolic_trace_records_no_shapes():
    gm = fx.symbolic_trace(MixedActivations())
    assert all("tensor_meta" not in node.meta and "val" not in node.meta for node in gm.graph.nodes)


@backs("notebooks/03_fx.ipynb", "后者其实在 `torch/fx/experimental/symbolic_shapes.py`")
def test_symbolic_shapes_lives_under_experimental():
    assert (TORCH_ROOT / "fx" / "graph.py").is_file()
    assert not (TORCH_ROOT / "fx" / "symbolic_shapes.py").exists()
    assert importlib.util.find_spec("torch.fx.symbolic_shapes") is None
    module = importlib.import_module("torch.fx.experimental.symbolic_shapes")
    assert Path(module.__file__) == TORCH_ROOT / "fx" / "experimental" / "symbolic_shapes.py"
    assert module.ShapeEnv.__module__ == module.__name__


@backs("notebooks/03_fx.ipynb", "再按 `n.op` 分派给六个同名方法之一")
def test_run_node_hands_fetched_values_to_the_method_named_by_the_opcode():
    calls = []

    def recorder(op):
        def record(self, target, args, kwargs):
            calls.append((op, args))
            return getattr(fx.Interpreter, op)(self, target, args, kwargs)
        return record

    Recording = type("Recording", (fx.Interpreter,), {op: recorder(op) for op in SIX_OPCODES})
    x = torch.randn(2, 4)
    Recording(fx.symbolic_trace(Scaled())).run(x)
    assert [op for op, _ in calls] == ["placeholder", "call_module", "get_attr", "call_function", "call_method", "output"]
    module_args = dict(calls)["call_module"]
    assert module_args[0] is x  # the node in n.args was replaced by its value


@backs("notebooks/03_fx.ipynb", "每个方法收到的参数是 Proxy")
def test_a_transformer_is_an_interpreter_whose_methods_see_proxies():
    seen = []

    class Recording(fx.Transformer):
        def call_function(self, target, args, kwargs):
            seen.append(type(args[0]))
            return super().call_function(target, args, kwargs)

    assert issubclass(fx.Transformer, fx.Interpreter)
    Recording(fx.symbolic_trace(lambda x: torch.sigmoid(x) * x)).transform()
    assert seen and set(seen) == {fx.Proxy}


@backs("notebooks/03_fx.ipynb", "`transform()` 返回新的 `GraphModule`，原图不变")
def test_transform_returns_a_new_graph_module_and_leaves_the_original():
    class HardSigmoid(fx.Transformer):
        def call_function(self, target, args, kwargs):
            return super().call_function(F.hardsigmoid if target is torch.sigmoid else target, args, kwargs)

    original = fx.symbolic_trace(lambda x: x * torch.sigmoid(x))
    code = original.code
    approx = HardSigmoid(original).transform()
    assert isinstance(approx, fx.GraphModule) and approx is not original
    assert original.code == code
    assert "hardsigmoid" in approx.code


@backs("notebooks/03_fx.ipynb", "分段线性近似 `F.hardsigmoid`")
def test_hardsigmoid_is_piecewise_linear():
    x = torch.linspace(-5, 5, 101)
    assert torch.allclose(F.hardsigmoid(x), torch.clamp(x / 6 + 0.5, 0, 1))


@backs("notebooks/03_fx.ipynb", "再调用 out= 版本 `aten::cos.out`")
def test_cos_on_a_backend_without_its_kernel_reaches_the_fallback_as_cos_out():
    import toychip

    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::cos", "CompositeExplicitAutogradNonFunctional")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::cos", "PrivateUse1")
    x = torch.randn(8, 16).to("toychip")
    toychip.reset_coverage()
    with toychip.profile() as profile:
        torch.cos(x)
    assert toychip.coverage().fallback == {"cos.out": 1}
    assert "copy:to_cpu                                   2" in profile.table()
    assert "copy:to_chip                                  1" in profile.table()


# Section 4: editing graphs

@backs("notebooks/03_fx.ipynb", "检查图是否合法（拓扑序、引用是否存在等）")
def test_lint_checks_topological_order_and_that_targets_exist():
    gm = fx.symbolic_trace(SeedModel())
    _, linear1, relu = list(gm.graph.nodes)[:3]
    linear1.prepend(relu)  # relu now comes before the linear1 it reads
    with pytest.raises(RuntimeError, match="used before it has been defined"):
        gm.graph.lint()

    gm = fx.symbolic_trace(SeedModel())
    next(node for node in gm.graph.nodes if node.op == "call_module").target = "missing"
    with pytest.raises(RuntimeError, match="nonexistent attribute"):
        gm.graph.lint()


@backs("notebooks/03_fx.ipynb", "删除一个**没有使用者**的节点")
def test_erase_node_refuses_a_node_that_still_has_users():
    gm = fx.symbolic_trace(SeedModel())
    linear1 = next(node for node in gm.graph.nodes if node.name == "linear1")
    with pytest.raises(RuntimeError, match="still had 1 users"):
        gm.graph.erase_node(linear1)


@backs("notebooks/03_fx.ipynb", "`gm.add_submodule` / `gm.delete_all_unused_submodules()`")
def test_graph_modules_add_and_delete_submodules():
    gm = fx.symbolic_trace(SeedModel())
    assert gm.add_submodule("spare", nn.ReLU())
    gm.delete_all_unused_submodules()
    assert not hasattr(gm, "spare") and hasattr(gm, "linear1")


@backs("notebooks/03_fx.ipynb", "`relu = torch._C._nn.gelu(linear1);  linear1 = None`")
def test_f_gelu_is_generated_as_torch_c_nn_gelu_and_the_node_keeps_its_name():
    gm = fx.symbolic_trace(SeedModel())
    relu = next(node for node in gm.graph.nodes if node.target is torch.relu)
    relu.target = F.gelu
    gm.recompile()
    assert F.gelu.__module__ == "torch._C._nn"
    assert "relu = torch._C._nn.gelu(linear1);  linear1 = None" in gm.code
    assert relu.name == "relu"


@backs("notebooks/03_fx.ipynb", "`call_module` 节点不能简单地把 `target` 改成函数")
def test_a_call_module_target_must_be_a_submodule_name():
    gm = fx.symbolic_trace(MixedActivations())
    next(node for node in gm.graph.nodes if node.op == "call_module" and node.target == "act").target = F.gelu
    with pytest.raises(ValueError, match="a str is expected"):
        gm.graph.lint()


@backs("notebooks/03_fx.ipynb", "直接 `replace_all_uses_with` 会把 `clamp` 的输入也改成 `clamp` 自己")
def test_replace_all_uses_with_makes_a_cycle_unless_the_new_node_is_excluded():
    for exclude_clamp, expected_input in ((False, "clamp"), (True, "linear1")):
        gm = fx.symbolic_trace(SeedModel())
        linear1 = next(node for node in gm.graph.nodes if node.name == "linear1")
        with gm.graph.inserting_after(linear1):
            clamp = gm.graph.call_function(torch.clamp, (linear1,), {"min": -6.0, "max": 6.0})
        callback = (lambda user: user is not clamp) if exclude_clamp else (lambda user: True)
        linear1.replace_all_uses_with(clamp, delete_user_cb=callback)
        assert clamp.args[0].name == expected_input


@backs("notebooks/03_fx.ipynb", "量化工具插入 observer / fake-quant 节点用的就是这个模式")
def test_fx_quantization_inserts_observers_after_a_node():
    prepare = importlib.import_module("torch.ao.quantization.fx.prepare")
    assert "graph.inserting_after(node)" in inspect.getsource(prepare._insert_obs_or_fq)


@backs("notebooks/03_fx.ipynb", "互不重叠的子图")
def test_replace_pattern_traces_both_functions_replaces_disjoint_matches_and_recompiles():
    from torch.fx import subgraph_rewriter

    source = inspect.getsource(subgraph_rewriter._replace_pattern)
    assert "symbolic_trace(pattern)" in source and "symbolic_trace(replacement)" in source
    gm = fx.symbolic_trace(lambda x: torch.relu(torch.relu(torch.relu(x))))
    matches = subgraph_rewriter.replace_pattern(gm, lambda x: torch.relu(torch.relu(x)), lambda x: torch.tanh(x))
    assert len(matches) == 1  # two overlapping candidates, one replaced
    assert "torch.tanh" in gm.code  # recompiled without being asked


@backs("notebooks/03_fx.ipynb", "`x * torch.sigmoid(x)` 正是 SiLU（Swish）激活")
def test_silu_is_x_times_its_sigmoid():
    x = torch.randn(100)
    assert torch.allclose(F.silu(x), x * torch.sigmoid(x))


# Section 5: a GraphModule's call

@backs("notebooks/03_fx.ipynb", "`torch.fx.graph_module._WrappedCall`")
def test_a_graph_module_call_goes_through_wrapped_call_which_quotes_the_failing_line(capsys):
    from torch.fx.graph_module import _WrappedCall

    gm = fx.symbolic_trace(lambda x: torch.mm(x, x))
    assert isinstance(type(gm)._wrapped_call, _WrappedCall)
    with pytest.raises(RuntimeError):
        gm(torch.randn(2, 3))  # fails on a line of the generated forward
    assert "generated forward function" in capsys.readouterr().err


# Section 6: make_fx

@backs("notebooks/03_fx.ipynb", "每个节点都是 `torch.ops.aten.xxx` 的某个重载（`OpOverload`）")
def test_make_fx_records_aten_overloads_with_example_values():
    gm = make_fx(pointwise_chains)(torch.randn(4, 4), torch.randn(4, 4))
    calls = [node for node in gm.graph.nodes if node.op == "call_function"]
    assert all(isinstance(node.target, torch._ops.OpOverload) and node.target.namespace == "aten" for node in calls)
    assert all(isinstance(node.meta["val"], torch.Tensor) for node in calls)


@backs("notebooks/03_fx.ipynb", 'make_fx` 图中的节点已经带了 `meta["val"]`')
def test_make_fx_nodes_carry_example_values_with_shapes():
    gm = make_fx(pointwise_chains)(torch.randn(4, 4), torch.randn(4, 4))
    assert {node.name: tuple(node.meta["val"].shape) for node in gm.graph.nodes if node.name in ("mm", "sum_1")} == {
        "mm": (4, 4), "sum_1": ()}


@backs("notebooks/03_fx.ipynb", "用 `__torch_dispatch__` 截获每个 ATen 调用")
def test_make_fx_traces_with_a_torch_dispatch_mode():
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
    from torch.utils._python_dispatch import TorchDispatchMode

    assert issubclass(ProxyTorchDispatchMode, TorchDispatchMode)
    assert "__torch_dispatch__" in vars(ProxyTorchDispatchMode)


@backs("notebooks/03_fx.ipynb", "`torch.Tag.pointwise` 表示逐点（pointwise）算子")
def test_pointwise_chains_tags_and_users():
    gm = make_fx(pointwise_chains)(torch.randn(4, 4), torch.randn(4, 4))
    calls = [node for node in gm.graph.nodes if node.op == "call_function"]
    pointwise = {node.name for node in calls if torch.Tag.pointwise in node.target.tags}
    assert [node.name for node in calls] == ["sin", "add", "mul", "relu", "mm", "sigmoid", "mul_1", "sub", "sum_1",
                                             "add_1", "exp"]
    assert {node.name for node in calls} - pointwise == {"mm", "sum_1"}
    assert len(next(node for node in calls if node.name == "relu").users) == 3


@backs("notebooks/03_fx.ipynb", "在 Dynamo 的图上用 `make_fx` 同样的机制追踪到 ATen 级别")
def test_aot_autograd_traces_its_graphs_with_make_fx():
    graph_capture = importlib.import_module("torch._functorch._aot_autograd.graph_capture")
    assert graph_capture.make_fx is make_fx
    assert "make_fx(" in inspect.getsource(graph_capture)


# Section 7: FX and TorchScript

@backs("notebooks/03_fx.ipynb", "`torch.export` 的图都是 FX 图")
def test_torch_export_holds_an_aten_level_graph_module():
    program = torch.export.export(SeedModel(), (torch.randn(2, 10),))
    assert isinstance(program.graph_module, fx.GraphModule)
    calls = [node for node in program.graph_module.graph.nodes if node.op == "call_function"]
    assert calls and all(isinstance(node.target, torch._ops.OpOverload) for node in calls)


@backs("notebooks/03_fx.ipynb", "只发出一个 TracerWarning")
def test_trace_bakes_the_branch_it_took_with_a_tracer_warning_and_script_keeps_prim_if():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(branchy, torch.ones(3))
        scripted = torch.jit.script(branchy)
    assert any(w.category is torch.jit.TracerWarning for w in caught)
    assert "prim::If" not in str(traced.graph)
    assert torch.equal(traced(-torch.ones(3)), -torch.ones(3) * 2)  # the x > 0 branch, for any input
    assert "prim::If" in str(scripted.graph)


@backs("notebooks/03_fx.ipynb", "带类型、带控制流（`prim::If`、`prim::Loop`）的 SSA 图")
def test_torchscript_ir_keeps_loops_as_prim_loop():
    def halve(x, n: int):
        for _ in range(n):
            x = x / 2
        return x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert "prim::Loop" in str(torch.jit.script(halve).graph)


@backs("notebooks/03_fx.ipynb", "普通的 `python` 默认隐藏这类警告")
def test_torchscript_warns_deprecation_from_inside_torch_which_python_hides_by_default():
    for capture in (lambda: torch.jit.script(branchy), lambda: torch.jit.trace(lambda x: x * 2, torch.ones(1))):
        caught = deprecation_warnings(capture)
        assert caught
        assert all("Please switch to `torch.compile` or `torch.export`" in str(w.message) for w in caught)
        # Python shows a DeprecationWarning by default only when it is attributed to __main__
        assert all(Path(w.filename).is_relative_to(TORCH_ROOT / "jit") for w in caught)


@backs("notebooks/03_fx.ipynb", "`torch/fx/`（`graph.py`、`node.py`")
def test_the_source_files_named_in_further_reading_exist():
    named = ["fx/graph.py", "fx/node.py", "fx/proxy.py", "fx/_symbolic_trace.py", "fx/interpreter.py",
             "fx/passes/shape_prop.py", "fx/passes/split_module.py", "fx/passes/utils/fuser_utils.py",
             "fx/experimental/proxy_tensor.py", "fx/experimental/symbolic_shapes.py"]
    assert [path for path in named if not (TORCH_ROOT / path).is_file()] == []
    assert inspect.getsourcefile(make_fx) == str(TORCH_ROOT / "fx" / "experimental" / "proxy_tensor.py")


# Facts the exercises' prompts rely on

@backs("notebooks/03_fx.ipynb", "`F.relu_` 就是它")
def test_f_relu_underscore_is_torch_relu_underscore():
    assert F.relu_ is torch.relu_


@backs("notebooks/03_fx.ipynb", "而 `F.gelu` 不接受它")
def test_f_relu_nodes_carry_inplace_and_f_gelu_rejects_it():
    gm = fx.symbolic_trace(MixedActivations())
    assert [node.kwargs for node in gm.graph.nodes if node.target is F.relu] == [{"inplace": False}]
    with pytest.raises(TypeError, match="inplace"):
        F.gelu(torch.ones(2), inplace=False)


@backs("notebooks/03_fx.ipynb", "默认的 `approximate='none'`")
def test_gelu_defaults_to_the_exact_form():
    assert 'str approximate="none"' in str(torch.ops.aten.gelu.default._schema)
    x = torch.linspace(-3, 3, 61)
    assert torch.equal(F.gelu(x), F.gelu(x, approximate="none"))
    assert not torch.equal(F.gelu(x), F.gelu(x, approximate="tanh"))


@backs("notebooks/03_fx.ipynb", "它们都继承自 `nn.modules.dropout._DropoutNd`")
def test_every_dropout_module_is_a_dropout_nd():
    dropouts = [cls for name, cls in vars(nn).items() if isinstance(cls, type) and "Dropout" in name]
    assert len(dropouts) >= 6
    assert all(issubclass(cls, nn.modules.dropout._DropoutNd) for cls in dropouts)


@backs("notebooks/03_fx.ipynb", "`training` 已被固化为 `True`")
def test_functional_dropout_traced_in_train_mode_keeps_training_true():
    gm = fx.symbolic_trace(ModelWithDropout().train())
    assert [node.kwargs["training"] for node in gm.graph.nodes if node.target is F.dropout] == [True]


@backs("notebooks/03_fx.ipynb", "`track_running_stats=True`，默认")
def test_batchnorm_tracks_running_stats_by_default():
    assert nn.BatchNorm2d(3).track_running_stats is True


@backs("notebooks/03_fx.ipynb", "Inductor 的冻结（freezing）优化")
def test_inductor_folds_conv_bn_when_freezing():
    source = function_source(TORCH_ROOT / "_inductor" / "fx_passes" / "pre_grad.py", "fuse_fx")
    assert source.index("if config.freezing:") < source.index("gm = fuse_conv_bn(gm)")


@backs("notebooks/03_fx.ipynb", "`t`、`view`、`expand` 这样的视图（view）操作和 dtype 转换 `_to_copy` 也没有这个标签")
def test_views_and_casts_are_not_pointwise():
    aten = torch.ops.aten
    for op in (aten.t.default, aten.view.default, aten.expand.default, aten._to_copy.default):
        assert torch.Tag.pointwise not in op.tags, op


@backs("notebooks/03_fx.ipynb", "`output` 节点也算使用者")
def test_the_output_node_counts_as_a_user():
    def returned_and_used(x):
        a = torch.sin(x)
        return a, a.exp()

    gm = make_fx(returned_and_used)(torch.randn(3))
    sin = next(node for node in gm.graph.nodes if node.name == "sin")
    assert sorted(user.op for user in sin.users) == ["call_function", "output"]


@backs("notebooks/03_fx.ipynb", "`torch.export` 把 `torch.cond` 记成一个 `call_function` 节点")
def test_export_records_torch_cond_as_one_call_with_subgraphs():
    class Branchy(nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, (x,))

    gm = torch.export.export(Branchy(), (torch.randn(3),)).graph_module
    [cond] = [node for node in gm.graph.nodes if node.target is torch.ops.higher_order.cond]
    assert cond.op == "call_function"
    branches = cond.args[1:3]
    assert [node.op for node in branches] == ["get_attr", "get_attr"]
    assert all(isinstance(gm.get_submodule(node.target), fx.GraphModule) for node in branches)
