"""Facts about torch 2.13 that chapter 02 (TorchScript) relies on, each pinned to its sentence."""
import ast
import contextlib
import inspect
import io
import math
import re
import shutil
import subprocess
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.utils.cpp_extension as cpp_extension
from torch._sources import fake_range
from torch._subclasses.fake_tensor import FakeTensor
from torch.export import Dim

from course_models.ch02_models import (LOOP_WITH_BRANCH, BoolFlagModel, ConvBNReLU, HalveUntilSmall, NumpyActivation,
                                       NumpyGate, RoutedExperts, SeedSimpleModel, TensorFlagModel, with_trained_batchnorm)
from facts import backs, function_source

TORCH_ROOT = Path(torch.__file__).parent
TORCH_LIB = TORCH_ROOT / "lib"
TORCH_INCLUDE = TORCH_ROOT / "include"

# Every torch.jit entry point warns; the tests that are about the warnings record them themselves.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::torch.jit.TracerWarning")


def recorded(action) -> list:
    """The warnings ``action()`` raises, every one of them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    return list(caught)


def deprecations(action) -> list:
    return [w for w in recorded(action) if w.category is DeprecationWarning]


def one_line_of(error: BaseException) -> str:
    """The last non-empty line of an error's message (TorchScript puts its source excerpt first)."""
    return [line for line in str(error).splitlines() if line.strip()][-1]


def jit_actions() -> dict:
    """One call of each public torch.jit entry point the chapter names; save gets a module scripted beforehand."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scripted = torch.jit.script(nn.Linear(2, 2))
    buffer = io.BytesIO()
    return {
        "script": lambda: torch.jit.script(nn.Linear(2, 2)),
        "trace": lambda: torch.jit.trace(nn.Linear(2, 2), torch.randn(1, 2)),
        "save": lambda: torch.jit.save(scripted, buffer),
        "load": lambda: torch.jit.load(io.BytesIO(buffer.getvalue())),
    }


def scripted(module: nn.Module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.script(module)


def traced(module: nn.Module, *example):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.trace(module, example)


def loop_graph():
    return torch.jit.CompilationUnit(LOOP_WITH_BRANCH).halve_or_shift.graph


def kinds(nodes) -> list[str]:
    return [node.kind() for node in nodes]


# Section 1: deprecation

@backs("notebooks/02_torchscript.ipynb", "已被弃用（deprecated）")
def test_script_trace_save_and_load_warn_that_they_are_deprecated():
    for name, action in jit_actions().items():
        assert any("deprecated" in str(w.message) for w in deprecations(action)), name


@backs("notebooks/02_torchscript.ipynb", "警告归属于 `torch/jit/` 里调用 `warnings.warn` 的那一行")
def test_the_deprecation_warnings_are_attributed_to_torch_jit_not_to_the_caller():
    for name, action in jit_actions().items():
        for warning in deprecations(action):
            assert Path(warning.filename).parent == TORCH_ROOT / "jit", (name, warning.filename)


@backs("notebooks/02_torchscript.ipynb", "`script` 和 `trace` 说 `... is deprecated. Please switch to torch.compile or torch.export.`")
def test_script_and_trace_point_to_compile_and_export():
    actions = jit_actions()
    for name in ("script", "trace"):
        expected = f"`torch.jit.{name}` is deprecated. Please switch to `torch.compile` or `torch.export`."
        assert expected in [str(w.message) for w in deprecations(actions[name])]


@backs("notebooks/02_torchscript.ipynb", "`save` 和 `load` 只建议 `torch.export`")
def test_save_and_load_point_to_export_only():
    actions = jit_actions()
    for name in ("save", "load"):
        messages = [str(w.message) for w in deprecations(actions[name])]
        assert messages == [f"`torch.jit.{name}` is deprecated. Please switch to `torch.export`."]


@backs("notebooks/02_torchscript.ipynb", "内部还调用了 `torch.jit.trace_module`，后者也发出警告（原文把自己的名字写成了 `trace_method`）")
def test_tracing_a_module_warns_again_from_trace_module_under_the_name_trace_method():
    warned = deprecations(lambda: torch.jit.trace(nn.Linear(2, 2), torch.randn(1, 2), check_trace=False))
    assert [str(w.message).split("`")[1] for w in warned] == ["torch.jit.trace", "torch.jit.trace_method"]
    source = function_source(TORCH_ROOT / "jit" / "_trace.py", "trace_module")
    assert "`torch.jit.trace_method` is deprecated." in source


@backs("notebooks/02_torchscript.ipynb", "默认的 `check_trace=True` 会再追踪一遍来核对结果")
def test_check_trace_is_on_by_default_and_traces_the_module_again():
    assert inspect.signature(torch.jit.trace).parameters["check_trace"].default is True
    warned = deprecations(jit_actions()["trace"])
    assert [str(w.message).split("`")[1] for w in warned].count("torch.jit.trace_method") == 2
    assert len({(w.filename, w.lineno) for w in warned if "trace_method" in str(w.message)}) == 1


@backs("notebooks/02_torchscript.ipynb", "is not supported in Python 3.14+ and may break.")
def test_from_python_3_14_the_warnings_say_not_supported():
    for file, function in [("_script.py", "script"), ("_trace.py", "trace"),
                           ("_serialization.py", "save"), ("_serialization.py", "load")]:
        source = function_source(TORCH_ROOT / "jit" / file, function)
        assert "sys.version_info >= (3, 14)" in source
        assert f"`torch.jit.{function}` is not supported in Python 3.14+ and may break. " in source


def deprecation_notes() -> dict[str, tuple[str, str]]:
    """Public ``torch.jit`` names whose docstring carries a Sphinx ``.. deprecated::`` note: (version, first line)."""
    notes = {}
    for name in dir(torch.jit):
        found = re.search(r"\.\. deprecated:: (\S+)\s+(.+)", getattr(getattr(torch.jit, name), "__doc__", None) or "")
        if found and not name.startswith("_"):
            notes[name] = found.groups()
    return notes


@backs("notebooks/02_torchscript.ipynb", "这些运行时警告都不带版本号")
def test_the_runtime_deprecation_warnings_name_no_version():
    for name, action in jit_actions().items():
        for warning in deprecations(action):
            assert not re.search(r"\d", str(warning.message)), (name, str(warning.message))


@backs("notebooks/02_torchscript.ipynb", "torch 的文档字符串里写的是 `.. deprecated:: 2.5`")
@backs("notebooks/02_torchscript.ipynb", "上面列出的 API 标注 `.. deprecated:: 2.5`，让读者改用 `torch.compile`")
@backs("notebooks/02_torchscript.ipynb", "部分 API 的文档字符串标注 `deprecated:: 2.5`")
@backs("notebooks/02_torchscript.ipynb", "一批 `torch.jit` API 的文档字符串标注 `deprecated:: 2.5`")
@backs("notebooks/00_guide.ipynb", "文档字符串 (docstring) 带有 `.. deprecated:: 2.5` 的标注，让读者改用 `torch.compile`")
@backs("notebooks/00_guide.ipynb", "部分 `torch.jit` API 的文档字符串标注 `deprecated:: 2.5`")
def test_the_torch_jit_docstrings_that_carry_a_deprecation_note_all_say_2_5():
    notes = deprecation_notes()
    assert {"annotate", "isinstance", "freeze", "fork", "interface", "export", "ignore"} <= set(notes)
    assert {version for version, _ in notes.values()} == {"2.5"}
    assert all("torch.compile" in line for _, line in notes.values())


@backs("notebooks/02_torchscript.ipynb", "一批 API 的原文是 \"TorchScript is deprecated, please use ``torch.compile`` instead.\"")
@backs("notebooks/02_torchscript.ipynb", "`export`、`ignore` 的原文是 \"Please use :func:`torch.compile` instead.\"")
def test_the_deprecation_notes_have_two_wordings():
    notes = deprecation_notes()
    for name in ("annotate", "freeze", "fork", "interface"):
        assert notes[name][1] == "TorchScript is deprecated, please use ``torch.compile`` instead."
    for name in ("export", "ignore"):
        assert notes[name][1] == "Please use :func:`torch.compile` instead."
    assert {line for _, line in notes.values()} == {"TorchScript is deprecated, please use ``torch.compile`` instead.",
                                                    "Please use :func:`torch.compile` instead."}


@backs("notebooks/02_torchscript.ipynb", "文档字符串里没有这条标注")
@backs("notebooks/02_torchscript.ipynb", "（`script` / `trace` / `save` / `load` 的没有）")
@backs("notebooks/00_guide.ipynb", "而 `script` / `trace` 自己的文档字符串里没有这条")
def test_script_trace_save_and_load_docstrings_carry_no_deprecation_note():
    assert not {"script", "trace", "save", "load"} & set(deprecation_notes())


@backs("notebooks/02_torchscript.ipynb", "`torch/jit/__init__.py`、`_freeze.py`、`_async.py` 等")
def test_the_deprecation_notes_are_in_the_torch_jit_sources():
    for file in ("__init__.py", "_freeze.py", "_async.py"):
        assert ".. deprecated:: 2.5" in (TORCH_ROOT / "jit" / file).read_text(encoding="utf-8"), file


@backs("notebooks/02_torchscript.ipynb", "C++ 解释器（libtorch），不依赖 Python")
def test_the_wheel_declares_torch_jit_load_for_cpp():
    header = (TORCH_INCLUDE / "torch/csrc/jit/serialization/import.h").read_text(encoding="utf-8")
    assert "TORCH_API Module load(" in header
    assert (TORCH_INCLUDE / "torch/script.h").is_file()


# Section 2: trace

@backs("notebooks/02_torchscript.ipynb", "追踪得到的类型里写着**具体形状**（`Float(1, 3, 16, 16, ...)`）")
def test_a_traced_graph_types_its_input_with_the_example_shape():
    program = traced(SeedSimpleModel().eval(), torch.randn(1, 3, 16, 16))
    assert "%x : Float(1, 3, 16, 16, strides=" in str(program.graph)


@backs("notebooks/02_torchscript.ipynb", "trace 把示例的形状写进类型，运行时并不检查")
def test_a_traced_program_runs_on_other_shapes():
    program = traced(SeedSimpleModel().eval(), torch.randn(1, 3, 16, 16))
    assert program(torch.randn(5, 3, 16, 16)).shape == (5, 8, 14, 14)


@backs("notebooks/02_torchscript.ipynb", "`prim::GetAttr` 取子模块，`prim::CallMethod` 调用子模块的 `forward`")
def test_the_top_level_traced_graph_calls_submodules():
    program = traced(SeedSimpleModel().eval(), torch.randn(1, 3, 16, 16))
    assert kinds(program.graph.nodes()) == ["prim::GetAttr", "prim::GetAttr", "prim::CallMethod", "prim::CallMethod"]


@backs("notebooks/02_torchscript.ipynb", "`traced.inlined_graph` 把子模块内联展开，能看到真正的 `aten::_convolution`")
def test_the_inlined_graph_shows_the_convolution():
    program = traced(SeedSimpleModel().eval(), torch.randn(1, 3, 16, 16))
    inlined = kinds(program.inlined_graph.nodes())
    assert "aten::_convolution" in inlined and "prim::CallMethod" not in inlined


@backs("notebooks/02_torchscript.ipynb", "抛出 `Type 'Tuple[Tensor, bool]' cannot be traced`")
def test_tracing_with_a_python_bool_raises():
    with pytest.raises(RuntimeError) as raised:
        traced(BoolFlagModel(), torch.randn(2, 4), True)
    assert str(raised.value).startswith("Type 'Tuple[Tensor, bool]' cannot be traced. "
                                        "Only Tensors and (possibly nested) Lists, Dicts, and Tuples of Tensors can be traced")


@backs("notebooks/02_torchscript.ipynb", "追踪器只能把当时的值（`True`）当作常量记下来，并发出 `TracerWarning`")
def test_a_tensor_flag_is_baked_in_with_a_tracer_warning():
    model = TensorFlagModel()
    holder = []
    caught = recorded(lambda: holder.append(torch.jit.trace(model, (torch.randn(2, 4), torch.tensor(True)))))
    assert any(w.category is torch.jit.TracerWarning
               and str(w.message).startswith("Converting a tensor to a Python boolean might cause the trace to be incorrect")
               for w in caught)
    program = holder[0]
    assert "if " not in program.code and "torch.relu(" in program.code
    x, off = torch.randn(8, 4), torch.tensor(False)
    assert torch.equal(program(x, off), torch.relu(model(x, off)))


@backs("notebooks/02_torchscript.ipynb", "追踪时的示例输入需要减半 2 次，于是 IR 里就写死了 2 次除法")
def test_a_data_dependent_loop_is_unrolled_for_the_example():
    program = traced(HalveUntilSmall(), torch.full((4,), 1.5))
    assert program.code.count("torch.div(") == 2
    assert torch.equal(program(torch.full((4,), 100.0)), torch.full((4,), 25.0))


@backs("notebooks/02_torchscript.ipynb", "追踪把 `np.tanh(x)` 的**数值结果**存成了 `prim::Constant`")
def test_a_numpy_result_becomes_a_constant_of_the_example_shape():
    constant = traced(NumpyActivation(), torch.randn(2, 4)).graph.findNode("prim::Constant")
    assert constant.output().type().sizes() == [2, 4]


@backs("notebooks/02_torchscript.ipynb", "batch 为 1 时更糟：`(1, 4)` 与常量 `(2, 4)` 按广播规则相加，得到 `(2, 4)`")
def test_the_numpy_constant_broadcasts_batch_one_and_breaks_batch_three():
    program = traced(NumpyActivation(), torch.randn(2, 4))
    assert program(torch.randn(1, 4)).shape == (2, 4)
    with pytest.raises(RuntimeError) as raised:
        program(torch.randn(3, 4))
    assert "The size of tensor a (3) must match the size of tensor b (2)" in one_line_of(raised.value)


@backs("notebooks/02_torchscript.ipynb", "`.item()` 都被固化，只留下 `TracerWarning`")
def test_item_is_baked_in_with_a_tracer_warning():
    class TimesSum(nn.Module):
        def forward(self, x):
            return x * x.sum().item()

    holder = []
    caught = recorded(lambda: holder.append(torch.jit.trace(TimesSum(), torch.ones(3))))
    assert any(w.category is torch.jit.TracerWarning and "Python number" in str(w.message) for w in caught)
    assert torch.equal(holder[0](torch.full((3,), 2.0)), torch.full((3,), 6.0))   # the example's sum, 3, baked in


@backs("notebooks/02_torchscript.ipynb", "并把 Conv 后面的 BatchNorm **折叠**进卷积")
def test_freeze_folds_the_batchnorm_into_the_convolution():
    torch.manual_seed(0)
    model = with_trained_batchnorm(ConvBNReLU())
    frozen = torch.jit.freeze(traced(model, torch.randn(1, 3, 8, 8)))
    assert [k for k in kinds(frozen.graph.nodes()) if k.startswith("aten::")] == ["aten::_convolution", "aten::relu"]


@backs("notebooks/02_torchscript.ipynb", "它把参数变成常量")
def test_freeze_turns_parameters_into_constants():
    frozen = torch.jit.freeze(traced(ConvBNReLU().eval(), torch.randn(1, 3, 8, 8)))
    assert "prim::GetAttr" not in kinds(frozen.graph.nodes())
    convolution = frozen.graph.findNode("aten::_convolution")
    weight = list(convolution.inputs())[1].node()
    assert weight.kind() == "prim::Constant"


@backs("notebooks/02_torchscript.ipynb", "折叠改变了浮点运算的顺序，结果只在最后几位不同")
def test_the_folded_program_differs_in_the_last_bits_only():
    torch.manual_seed(0)
    model = with_trained_batchnorm(ConvBNReLU())
    frozen = torch.jit.freeze(traced(model, torch.randn(1, 3, 8, 8)))
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected, got = model(x), frozen(x)
    assert not torch.equal(expected, got)
    assert (expected - got).abs().max() < 1e-5


# Section 3: script

@backs("notebooks/02_torchscript.ipynb", "对 `nn.Module` 子类这样做会报错")
def test_scripting_a_module_class_raises():
    class DecoratedModel(nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(RuntimeError, match="cannot be compiled since it inherits from nn.Module, pass an instance instead"):
        scripted(DecoratedModel)


@backs("notebooks/02_torchscript.ipynb", "TorchScript 把**没有注解的参数一律当作 `Tensor`**")
def test_unannotated_arguments_are_tensors():
    def scale(x, n):
        return x * n

    assert [str(argument.type) for argument in torch.jit.script(scale).schema.arguments] == ["Tensor", "Tensor"]


@backs("notebooks/02_torchscript.ipynb", "脚本化之后 `if` 还在，两个分支都对")
def test_scripting_keeps_the_branch():
    program = scripted(BoolFlagModel())
    assert kinds(program.graph.nodes()).count("prim::If") == 1


@backs("notebooks/02_torchscript.ipynb", "`cannot create weak reference to 'numpy.ufunc' object`——报错完全没提到")
def test_scripting_numpy_gate_raises_a_type_error_without_a_location():
    with pytest.raises(TypeError) as raised:
        scripted(NumpyGate())
    assert str(raised.value) == "cannot create weak reference to 'numpy.ufunc' object"


@backs("notebooks/02_torchscript.ipynb", "`math`、`len` 这类内置函数")
def test_script_accepts_math_and_len():
    def scale_by_root_of_length(x, sizes: list[int]):
        return x * math.sqrt(len(sizes))

    program = torch.jit.script(scale_by_root_of_length)
    assert torch.equal(program(torch.ones(2), [1, 2, 3, 4]), torch.full((2,), 2.0))


class UntypedTemperature(nn.Module):
    def forward(self, x, temperature=None):
        if temperature is not None:
            x = x / temperature
        return x


@backs("notebooks/02_torchscript.ipynb", "所以 `is not None` 的判断在编译时就被折叠掉了，图里只剩一个无条件的 `aten::div`")
def test_an_unannotated_none_default_becomes_a_tensor_and_the_none_check_folds_away():
    program = scripted(UntypedTemperature())
    assert [str(argument.type) for argument in program.forward.schema.arguments][1:] == ["Tensor", "Tensor"]
    assert kinds(program.graph.nodes()) == ["aten::div"]


@backs("notebooks/02_torchscript.ipynb", "传 `2.0` 时 Python 的 `float` 转不成 `Tensor`，不传时除以一个未定义的张量")
def test_the_untyped_temperature_fails_with_a_float_and_without_one():
    program = scripted(UntypedTemperature())
    with pytest.raises(RuntimeError) as with_float:
        program(torch.ones(2), 2.0)
    assert one_line_of(with_float.value) == "Cast error details: Unable to cast 2.0 to Tensor"
    with pytest.raises(RuntimeError) as without:
        program(torch.ones(2))
    assert "Expected a proper Tensor but got None (or an undefined Tensor in C++)" in one_line_of(without.value)


@backs("notebooks/02_torchscript.ipynb", "条件是张量时，TorchScript 自动插入一次到 `bool` 的转换（IR 里的 `aten::Bool`")
def test_a_tensor_condition_gets_an_implicit_bool():
    def double_if_positive(x):
        if x.sum() > 0:
            return x * 2
        return x

    program = torch.jit.script(double_if_positive)
    assert "if bool(torch.gt(torch.sum(x), 0)):" in program.code
    assert "aten::Bool" in kinds(program.graph.nodes())


# Section 4: the IR

IMPLICIT_BOOL_LOOP = LOOP_WITH_BRANCH.replace("if bool(x.sum() > 0):", "if x.sum() > 0:")


def if_condition_kind(graph) -> str:
    return next(graph.findNode("prim::If").inputs()).node().kind()


@backs("notebooks/02_torchscript.ipynb", "`LOOP_WITH_BRANCH` 的源码自己写了 `bool(x.sum() > 0)`")
@backs("notebooks/02_torchscript.ipynb", "不写 `bool(...)`，TorchScript 也会插入同一个节点")
def test_an_explicit_and_an_implicit_bool_give_the_same_program():
    assert IMPLICIT_BOOL_LOOP != LOOP_WITH_BRANCH
    explicit = torch.jit.CompilationUnit(LOOP_WITH_BRANCH).halve_or_shift
    implicit = torch.jit.CompilationUnit(IMPLICIT_BOOL_LOOP).halve_or_shift
    assert if_condition_kind(explicit.graph) == if_condition_kind(implicit.graph) == "aten::Bool"
    assert explicit.code == implicit.code


@backs("notebooks/02_torchscript.ipynb", "（`block0` 是 then 分支，`block1` 是 else 分支）")
def test_prim_if_has_a_then_block_and_an_else_block():
    branch = scripted(BoolFlagModel()).graph.findNode("prim::If")
    then_block, else_block = branch.blocks()
    assert kinds(then_block.nodes()) == ["aten::relu"] and kinds(else_block.nodes()) == []
    assert [v.debugName() for v in branch.outputs()] == ["x"]


@backs("notebooks/02_torchscript.ipynb", "`torch.jit.CompilationUnit` 可以直接编译一段 TorchScript 源码")
def test_a_compilation_unit_compiles_source_text():
    assert isinstance(loop_graph(), torch.Graph)


@backs("notebooks/02_torchscript.ipynb", "`prim::Loop(%n.1, %5, %x.1)` 的三个输入是")
def test_the_loop_graph_prints_as_the_chapter_reads_it():
    text = str(loop_graph())
    assert "%x : Tensor = prim::Loop(%n.1, %5, %x.1)" in text
    assert "%5 : bool = prim::Constant[value=1]()" in text
    assert "block0(%i : int, %x.31 : Tensor):" in text
    assert "      -> (%5, %x.29)\n" in text


@backs("notebooks/02_torchscript.ipynb", "`graph.nodes()`（**不**包含块里的节点）")
def test_graph_nodes_lists_the_top_level_only():
    assert kinds(loop_graph().nodes()) == ["prim::Constant"] * 5 + ["prim::Loop"]


@backs("notebooks/02_torchscript.ipynb", "`graph.findNode(\"prim::If\")`（会搜索块内部）")
def test_find_node_searches_inside_blocks():
    graph = loop_graph()
    assert "prim::If" not in kinds(graph.nodes())
    assert graph.findNode("prim::If").kind() == "prim::If"


@backs("notebooks/02_torchscript.ipynb", "每个 `prim::If` 有 2 个块，每个 `prim::Loop` 有 1 个")
def test_every_if_has_two_blocks_even_without_else_and_every_loop_one():
    graph = torch.jit.CompilationUnit("def halve(x, n: int):\n"
                                      "    for i in range(n):\n"
                                      "        if bool(x.sum() > 0):\n"
                                      "            x = x / 2\n"
                                      "    return x\n").halve.graph
    loop = graph.findNode("prim::Loop")
    assert len(list(loop.blocks())) == 1
    assert len(list(graph.findNode("prim::If").blocks())) == 2


@backs("notebooks/02_torchscript.ipynb", "即 `prim::Return`）不在其中")
def test_block_returns_are_return_nodes_outside_nodes():
    graph = loop_graph()
    for block in graph.findNode("prim::If").blocks():
        assert block.returnNode().kind() == "prim::Return"
        assert "prim::Return" not in kinds(block.nodes())
    assert "prim::Return" not in kinds(graph.nodes())


# Section 5: save and load

@backs("notebooks/02_torchscript.ipynb", "得到一个 zip 文件，里面是 TorchScript **源码**和权重")
def test_a_saved_script_module_is_a_zip_of_code_and_data():
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(scripted(BoolFlagModel()), buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        names = archive.namelist()
    assert any("/code/" in name and name.endswith(".py") for name in names)
    assert any(name.endswith("/data.pkl") for name in names)
    assert any(re.search(r"/data/\d+$", name) for name in names)     # the weights
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert type(torch.jit.load(io.BytesIO(buffer.getvalue()))).__name__ == "RecursiveScriptModule"


@backs("notebooks/02_torchscript.ipynb", "只有 `ScriptModule` 才有 `.save`")
def test_only_script_modules_have_save():
    assert not hasattr(BoolFlagModel(), "save")
    assert callable(scripted(BoolFlagModel()).save)


# Section 6: C++

@backs("notebooks/02_torchscript.ipynb", "pip 安装的 `torch` 自带头文件和动态库")
def test_the_wheel_ships_headers_and_libraries():
    assert (TORCH_INCLUDE / "torch/script.h").is_file()
    assert all((TORCH_LIB / name).is_file() for name in ("libtorch.so", "libtorch_cpu.so", "libc10.so"))


@backs("notebooks/02_torchscript.ipynb", "`libtorch.so` 只是一个几乎空的壳")
def test_libtorch_is_a_stub_and_the_code_is_in_torch_cpu():
    assert (TORCH_LIB / "libtorch.so").stat().st_size < 256 * 1024   # CPU build 8 KB, CUDA build 89 KB
    assert (TORCH_LIB / "libtorch_cpu.so").stat().st_size > 100 * 1024 * 1024


@backs("notebooks/02_torchscript.ipynb", "`torch::jit::load` 在 `libtorch_cpu.so` 里")
def test_torch_jit_load_is_defined_in_torch_cpu_not_in_libtorch():
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    defined = subprocess.run(["nm", "-D", "--defined-only", str(TORCH_LIB / "libtorch.so")],
                             capture_output=True, text=True, check=True).stdout
    assert "jit" not in defined
    assert (TORCH_INCLUDE / "torch/csrc/jit/serialization/import.h").is_file()


@backs("notebooks/02_torchscript.ipynb", "进程里没有 Python")
def test_libtorch_cpu_does_not_link_python():
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    needed = subprocess.run(["readelf", "-d", str(TORCH_LIB / "libtorch_cpu.so")],
                            capture_output=True, text=True, check=True).stdout
    assert "libc10.so" in needed and "libpython" not in needed


@backs("notebooks/02_torchscript.ipynb", "头文件：`cpp_extension.include_paths()`（`torch/include` 和 `torch/include/torch/csrc/api/include`）")
def test_include_paths_are_the_two_header_roots():
    assert [Path(p) for p in cpp_extension.include_paths()] == [TORCH_INCLUDE, TORCH_INCLUDE / "torch/csrc/api/include"]


@backs("notebooks/02_torchscript.ipynb", "`-D_GLIBCXX_USE_CXX11_ABI=` 取 `torch._C._GLIBCXX_USE_CXX11_ABI`")
def test_the_abi_flag_is_exposed():
    assert isinstance(torch._C._GLIBCXX_USE_CXX11_ABI, bool)


@backs("notebooks/02_torchscript.ipynb", "2.13 自己的 `cpp_extension` 用的是 `-std=c++20`")
def test_cpp_extension_compiles_with_cpp20():
    source = inspect.getsource(cpp_extension)
    assert "'-std=c++20'" in source and "'-std=c++17'" not in source


@backs("notebooks/02_torchscript.ipynb", "头文件会给出\"位域默认初始化需要 C++20\"的警告")
def test_the_headers_use_cpp20_bit_field_initializers():
    header = (TORCH_INCLUDE / "c10/core/AutogradState.h").read_text(encoding="utf-8")
    assert re.search(r"bool \w+ : 1 = (true|false);", header)


# Section 7: limits, deprecation, migration

@backs("notebooks/02_torchscript.ipynb", "前者直接失败（这个 wheel 没有启用 XNNPACK）")
def test_optimize_for_mobile_fails_without_xnnpack():
    from torch.utils.mobile_optimizer import optimize_for_mobile
    assert not torch._C._is_xnnpack_enabled()
    with pytest.raises(RuntimeError, match="XNNPACK is not enabled"):
        optimize_for_mobile(scripted(nn.Linear(4, 4).eval()))


@backs("notebooks/02_torchscript.ipynb", "上面同一条警告出现了两次")
def test_the_lite_interpreter_warns_twice_pointing_to_executorch(tmp_path):
    small = scripted(nn.Linear(4, 4).eval())
    warned = deprecations(lambda: small._save_for_lite_interpreter(str(tmp_path / "small.ptl")))
    assert len(warned) == 2
    assert all(str(w.message).startswith("Lite Interpreter is deprecated. Please consider switching to ExecuTorch.")
               for w in warned)


@backs("notebooks/02_torchscript.ipynb", "`torch.compile` 返回的包装对象不是 TorchScript 能理解的东西，脚本化直接失败")
def test_a_compiled_module_cannot_be_scripted():
    with pytest.raises(Exception) as raised:
        scripted(torch.compile(nn.Linear(4, 4)))
    assert type(raised.value).__name__ == "ValueError" and "Unknown type annotation" in str(raised.value)


@backs("notebooks/02_torchscript.ipynb", "报错信息到 `at` 就结束了，这就是它的全文")
@backs("notebooks/02_torchscript.ipynb", "`OptimizedModule` 带着类型注解 `Callable[..., Any]`")
@backs("notebooks/00_guide.ipynb", "报错信息到 `at` 就结束了，这就是它的全文")
@backs("notebooks/00_guide.ipynb", "遇到了它的类型注解 `_torchdynamo_orig_callable: Callable[..., Any]`")
def test_scripting_a_compiled_module_fails_on_an_annotation_with_no_source_location():
    compiled = torch.compile(nn.Linear(4, 4))
    assert type(compiled).__name__ == "OptimizedModule"
    assert type(compiled).__annotations__["_torchdynamo_orig_callable"] == "Callable[..., Any]"
    with pytest.raises(ValueError) as raised:
        scripted(compiled)
    assert str(raised.value) == "Unknown type annotation: 'Callable[..., Any]' at "


@backs("notebooks/02_torchscript.ipynb", "`torch/jit/annotations.py` 的 `ann_to_type` 本该在 `at` 后面接上出错的源码位置")
@backs("notebooks/02_torchscript.ipynb", "可这个注解不在任何一段被编译的源码里，位置是空的")
def test_a_class_annotation_is_typed_with_an_empty_source_location():
    source = function_source(TORCH_ROOT / "jit" / "annotations.py", "ann_to_type")
    assert "raise ValueError(f\"Unknown type annotation: '{ann}' at {loc.highlight()}\")" in source
    recursive = (TORCH_ROOT / "jit" / "_recursive.py").read_text(encoding="utf-8")
    assert re.search(r"ann_to_type\(\s*class_annotations\[name\], fake_range\(\)", recursive)
    assert fake_range().highlight() == ""


@backs("notebooks/02_torchscript.ipynb", "能 `torch.export.save` 成 `.pt2` 文件")
def test_export_save_documents_the_pt2_extension():
    assert ".pt2" in torch.export.save.__doc__


@backs("notebooks/02_torchscript.ipynb", "C++ 用 `AOTIModelPackageLoader` 加载")
def test_aot_inductor_packages_and_its_cpp_loader_exist():
    functions = [node.name for node in ast.parse((TORCH_ROOT / "_inductor/__init__.py").read_text(encoding="utf-8")).body
                 if isinstance(node, ast.FunctionDef)]
    assert "aoti_compile_and_package" in functions
    loader = (TORCH_INCLUDE / "torch/csrc/inductor/aoti_package/model_package_loader.h").read_text(encoding="utf-8")
    assert "class TORCH_API AOTIModelPackageLoader" in loader


@backs("notebooks/02_torchscript.ipynb", "`torch.cond(pred, true_fn, false_fn, operands)`")
def test_cond_takes_pred_true_fn_false_fn_operands():
    assert list(inspect.signature(torch.cond).parameters) == ["pred", "true_fn", "false_fn", "operands"]


@backs("notebooks/02_torchscript.ipynb", "这个参数在 2.13 中**默认是 `False`**")
def test_export_defaults_to_non_strict():
    assert inspect.signature(torch.export.export).parameters["strict"].default is False


def export_probe(strict: bool) -> tuple[list, list]:
    """What ``forward`` received when run by Python, and the warnings, when exporting with ``strict``."""
    received = []

    class Probe(nn.Module):
        def forward(self, x):
            received.append(type(x))
            return torch.relu(x) * 2

    caught = recorded(lambda: torch.export.export(Probe(), (torch.randn(3),), strict=strict))
    return received, [str(w.message) for w in caught]


@backs("notebooks/02_torchscript.ipynb", "**用 Python 真的运行一遍 `forward`**，传进去的是假张量")
def test_non_strict_export_runs_forward_in_python_on_fake_tensors():
    received, _ = export_probe(strict=False)
    assert received == [FakeTensor]


@backs("notebooks/02_torchscript.ipynb", "和第 03 章的 `make_fx` 是同一类机制")
def test_non_strict_export_traces_to_aten_with_make_fx():
    trace_py = TORCH_ROOT / "export" / "_trace.py"
    text = trace_py.read_text(encoding="utf-8")
    assert "export_func = _strict_export if strict else _non_strict_export" in text
    assert "_to_aten_func=_export_to_aten_ir_make_fx," in text
    assert "make_fx(" in function_source(trace_py, "_export_to_aten_ir_make_fx")


@backs("notebooks/02_torchscript.ipynb", "由 **Dynamo**（第 05 章）符号执行 `forward` 的字节码，Python 解释器本身不运行它")
def test_strict_export_captures_with_dynamo_and_does_not_run_forward():
    received, messages = export_probe(strict=True)
    assert received == []
    assert any(m.startswith("While compiling, we found certain side effects happened in the model") for m in messages)
    trace_py = TORCH_ROOT / "export" / "_trace.py"
    assert "_export_to_torch_ir(" in function_source(trace_py, "_strict_export")
    assert "torch._dynamo.export(" in function_source(trace_py, "_export_to_torch_ir")


def linear_program(**dynamic):
    return torch.export.export(nn.Linear(4, 3), (torch.randn(2, 4),), **dynamic)


@backs("notebooks/02_torchscript.ipynb", "默认**按示例输入特化**形状")
def test_export_specializes_shapes_by_default():
    placeholder = next(n for n in linear_program().graph.nodes if n.op == "placeholder" and n.name == "input")
    assert tuple(placeholder.meta["val"].shape) == (2, 4)


@backs("notebooks/02_torchscript.ipynb", "换成 batch 5 就违反了导出时记录的守卫（guard）")
def test_a_static_program_rejects_another_batch_with_a_guard_error():
    with pytest.raises(Exception) as raised:
        linear_program().module()(torch.randn(5, 4))
    assert str(raised.value).splitlines()[0] == "Guard failed: input.size()[0] == 2"


@backs("notebooks/02_torchscript.ipynb", "下面打印的是 `s77`")
def test_the_batch_symbol_of_the_chapter_is_named_s77():
    program = torch.export.export(SeedSimpleModel().eval(), (torch.randn(2, 3, 16, 16),),
                                  dynamic_shapes={"x": {0: Dim("batch")}})
    placeholder = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == "x")
    batch = placeholder.meta["val"].shape[0]
    assert isinstance(batch, torch.SymInt) and str(batch) == "s77"


@backs("notebooks/02_torchscript.ipynb", "同一个程序能处理任意 batch")
def test_a_program_with_a_dim_runs_on_other_batches():
    program = linear_program(dynamic_shapes={"input": {0: Dim("batch")}}).module()
    assert [program(torch.randn(size, 4)).shape[0] for size in (1, 5, 32)] == [1, 5, 32]


@backs("notebooks/02_torchscript.ipynb", "两个分支都被导出成子图（`true_graph_0`、`false_graph_0`）")
def test_cond_exports_both_branches_as_subgraphs():
    class CondGate(nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: torch.relu(t) - 1, (x,))

    program = torch.export.export(CondGate(), (torch.randn(3),))
    code = program.graph_module.code
    assert "torch.ops.higher_order.cond(gt, true_graph_0, false_graph_0, (x,))" in code
    x = torch.randn(3).abs() + 0.1
    assert torch.equal(program.module()(x), x * 2) and torch.equal(program.module()(-x), torch.full((3,), -1.0))


def export_routed_experts_error() -> Exception:
    """The error ``torch.export`` raises on RoutedExperts' data-dependent ifs (the partial graph it prints is muted)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            torch.export.export(RoutedExperts().eval(), (torch.randn(3, 8),))
    except Exception as error:
        return error
    raise AssertionError("torch.export captured RoutedExperts' data-dependent ifs")


@backs("notebooks/02_torchscript.ipynb", "`torch.jit.script` 能处理它（IR 里是两个 `prim::If`），但直接交给 `torch.export` 会失败")
def test_routed_experts_scripts_with_two_ifs_and_fails_to_export_data_dependent():
    assert kinds(scripted(RoutedExperts()).graph.nodes()).count("prim::If") == 2
    error = export_routed_experts_error()
    assert type(error).__name__ == "GuardOnDataDependentSymNode"
    assert str(error).startswith("Could not guard on data-dependent expression")


@backs("notebooks/02_torchscript.ipynb", "它停在 `aten.item`——把比较结果变成 Python 的 `bool` 的那一步")
def test_the_partial_graph_stops_at_item():
    last = [line for line in export_routed_experts_error().partial_fx_graph.splitlines() if line.strip()][-1]
    assert "torch.ops.aten.item.default(ne)" in last


@backs("notebooks/02_torchscript.ipynb", "`torch/csrc/jit/ir/ir.h`（`Node`、`Block`、`Value`）")
def test_the_source_files_named_in_further_reading_exist():
    assert (TORCH_ROOT / "jit" / "_trace.py").is_file() and (TORCH_ROOT / "jit" / "_script.py").is_file()
    ir = (TORCH_INCLUDE / "torch/csrc/jit/ir/ir.h").read_text(encoding="utf-8")
    assert all(f"\nstruct {name} {{" in ir or f"\nstruct TORCH_API {name} {{" in ir for name in ("Node", "Block", "Value"))
    assert (TORCH_INCLUDE / "torch/csrc/jit/frontend/ir_emitter.h").is_file()
