"""Facts about torch (and CPython's bytecode) that chapter 05 (TorchDynamo) relies on, one test each.

Bytecode facts differ between Python 3.11, 3.12 and 3.13: those tests check what the running
Python should show, so run them on each tested version.
"""
import dis
import inspect
import json
import logging
import mmap
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch._dynamo
import torch.fx as fx
from torch._dynamo.utils import counters
from torch._C._dynamo.eval_frame import get_eval_frame_callback
from torch._dynamo import config, convert_frame, eval_frame, symbolic_convert, trace_rules, variables
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.convert_frame import register_bytecode_hook
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.testing import CompileCounter
from torch._subclasses.fake_tensor import FakeTensor

from course_models.ch05_models import (BATCH_MODELS, BREAK_PROGRAMS, FEATURES, STORM_MODELS, STRAIGHT_LINE_PROGRAMS,
                                       blend, dynamo_log, load_program, quiet_dynamo, scale_shift, transformed_code)
from facts import (backs, fresh_dynamo, function_source, guards_text, logged, recording, tlparse_report,
                   torch_trace_logs)

pytestmark = pytest.mark.usefixtures(fresh_dynamo.__name__)

PY = sys.version_info[:2]
TORCH_ROOT = Path(torch.__file__).parent
DYNAMO_HEADERS = TORCH_ROOT / "include" / "torch" / "csrc" / "dynamo"
TORCH_PYTHON_LIBRARY = TORCH_ROOT / "lib" / "libtorch_python.so"


def sin_affine(x):
    return torch.sin(x) * 2 + 1


def counting_runs(runs: list):
    """A backend whose compiled graphs note each time they run."""
    def backend(gm, example_inputs):
        def run(*args):
            runs.append(gm)
            return gm.forward(*args)
        return run
    return backend


def ones_x(n: int = 4):
    return torch.ones(n)


def compile_ids(fn) -> list[str]:
    return [str(entry.compile_id) for entry in _debug_get_cache_entry_list(fn)]


def instructions(fn) -> list[dis.Instruction]:
    return [inst for inst in dis.get_instructions(fn) if inst.opname not in ("RESUME", "CACHE")]


def opnames(fn) -> list[str]:
    return [inst.opname for inst in instructions(fn)]


def program(name: str):
    return load_program(STRAIGHT_LINE_PROGRAMS[name])


def loaded_globals(code) -> set[str]:
    return {inst.argval for inst in dis.get_instructions(code) if inst.opname == "LOAD_GLOBAL"}


def values_of(gm) -> dict[str, object]:
    """Each call node's example value: a shape for tensors, the value (a SymInt) otherwise."""
    values = {}
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if node.op in ("call_function", "call_method"):
            values[node.name] = tuple(value.shape) if isinstance(value, torch.Tensor) else value
    return values


def library_has(*names: str) -> list[bool]:
    """Whether each C name is a string in libtorch_python (its symbol table, file names)."""
    if not TORCH_PYTHON_LIBRARY.exists():
        pytest.skip("reads the Linux build of libtorch_python")
    with open(TORCH_PYTHON_LIBRARY, "rb") as library, \
            mmap.mmap(library.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return [data.find(name.encode() + b"\0") >= 0 for name in names]


def probed_callbacks() -> dict[str, object]:
    """The frame-evaluation callback seen from inside a compiled call, and after it."""
    seen = {}

    @torch.compiler.disable(recursive=False)
    def probe():
        seen["trace"], seen["profile"] = sys.gettrace(), sys.getprofile()
        seen["callback"] = get_eval_frame_callback()

    @torch.compiler.disable
    def disabled_probe():
        seen["disabled"] = get_eval_frame_callback()

    def with_probe(x):
        y = x + 1
        probe()
        disabled_probe()
        return y * 2

    torch.compile(with_probe, backend="eager")(torch.randn(3))
    seen["after"] = get_eval_frame_callback()
    return seen


# --- 0. the tools the chapter imports ------------------------------------------------------------

@backs("notebooks/05_dynamo.ipynb", "`frame_count` 是它被调用的次数（编译了几个帧），`op_count` 是收到的图里一共有多少个算子")
def test_compile_counter_counts_backend_calls_and_graph_operators():
    counter = CompileCounter()
    compiled = torch.compile(sin_affine, backend=counter)
    for _ in range(3):
        compiled(torch.randn(8))
    assert (counter.frame_count, counter.op_count) == (1, 3)


@backs("notebooks/05_dynamo.ipynb", "就把 `(原代码, 新代码)` 交给你的函数")
def test_bytecode_hook_receives_the_original_and_the_new_code():
    pairs = []
    handle = register_bytecode_hook(lambda code, new_code: pairs.append((code, new_code)))
    try:
        torch.compile(sin_affine, backend="eager")(torch.randn(3))
    finally:
        handle.remove()
    (code, new_code), = pairs
    assert code is sin_affine.__code__ and new_code is not code and inspect.iscode(new_code)


@backs("notebooks/05_dynamo.ipynb", "`_debug_get_cache_entry_list`（`torch._dynamo.eval_frame`）")
def test_cache_entry_list_is_importable_from_eval_frame():
    torch.compile(sin_affine, backend="eager")(torch.randn(3))
    assert len(eval_frame._debug_get_cache_entry_list(sin_affine)) == 1


@backs("notebooks/05_dynamo.ipynb", "`get_eval_frame_callback`（C 扩展 `torch._C._dynamo.eval_frame`）")
def test_get_eval_frame_callback_is_a_function_of_the_c_extension():
    assert inspect.isbuiltin(get_eval_frame_callback)
    assert get_eval_frame_callback is torch._C._dynamo.eval_frame.get_eval_frame_callback


# --- 1. PEP 523 and the callback ---------------------------------------------------------------------

@backs("notebooks/05_dynamo.ipynb", "编译后的代码运行时 `sys.gettrace()`、`sys.getprofile()` 都是 `None`")
def test_compiled_code_runs_with_no_trace_or_profile_function():
    seen = probed_callbacks()
    assert seen["trace"] is None and seen["profile"] is None


@backs("notebooks/05_dynamo.ipynb", "C 扩展 `torch._C._dynamo.eval_frame` 里登记着一个 Python 对象 `CatchErrorsWrapper`")
def test_a_compiled_call_registers_catch_errors_wrapper_and_restores_none():
    seen = probed_callbacks()
    assert type(seen["callback"]) is convert_frame.CatchErrorsWrapper and seen["after"] is None


@backs("notebooks/05_dynamo.ipynb", "这个回调有三层，都在 `convert_frame.py` 里")
def test_the_callback_is_catch_errors_wrapper_then_convert_frame_then_convert_frame_assert():
    callback = probed_callbacks()["callback"]
    layers = [callback, callback._torchdynamo_orig_backend, callback._torchdynamo_orig_backend._inner_convert]
    assert [type(layer) for layer in layers] == [convert_frame.CatchErrorsWrapper, convert_frame.ConvertFrame,
                                                 convert_frame.ConvertFrameAssert]
    assert all(inspect.getsourcefile(type(layer)).endswith("convert_frame.py") for layer in layers)


@backs("notebooks/05_dynamo.ipynb", "调用你的函数之前 `set_eval_frame(回调)`，之后恢复原来的回调")
def test_the_compile_wrapper_sets_the_callback_and_restores_the_prior_one():
    lines = [line.strip() for line in inspect.getsource(eval_frame._TorchDynamoContext.__call__).splitlines()]
    installs = lines.index("_maybe_set_eval_frame(_callback_from_stance(callback))")
    assert "prior = set_eval_frame(None)" in lines[:installs]
    assert "_maybe_set_eval_frame(prior)" in lines[installs:]


@backs("notebooks/05_dynamo.ipynb", "`torch.compile` 返回的包装器就在这里")
def test_the_function_torch_compile_returns_is_defined_in_eval_frame_py():
    compiled = torch.compile(sin_affine, backend="eager")
    assert compiled.__code__.co_filename.endswith(os.path.join("_dynamo", "eval_frame.py"))


@backs("notebooks/05_dynamo.ipynb", "通过 CPython 的 `_PyInterpreterState_SetEvalFrameFunc` 装上 C 写的帧求值函数")
def test_set_eval_frame_is_c_code_that_calls_the_pep_523_setter():
    assert inspect.isbuiltin(torch._C._dynamo.eval_frame.set_eval_frame)
    assert library_has("_PyInterpreterState_SetEvalFrameFunc", "torch/csrc/dynamo/eval_frame.c") == [True, True]


@backs("notebooks/05_dynamo.ipynb", "`@torch.compiler.disable` 默认（`recursive=True`）在进入函数时把回调临时换成 `None`")
def test_disable_unsets_the_callback_and_nonrecursive_disable_keeps_it():
    seen = probed_callbacks()
    assert seen["disabled"] is None and seen["callback"] is not None


@backs("notebooks/05_dynamo.ipynb", "`CatchErrorsWrapper` 先跳过不该编译的帧（跳过名单上的代码，例如 torch 自己的模块；已经开始执行的帧……）")
def test_catch_errors_wrapper_skips_skiplisted_and_already_started_frames():
    source = inspect.getsource(convert_frame.CatchErrorsWrapper.__call__)
    assert "frame is in the Dynamo skipfiles list" in source and "frame has already started executing" in source
    assert trace_rules.check(torch._dynamo.reset.__code__)


@backs("notebooks/05_dynamo.ipynb", "`ConvertFrameAssert` 再做几项跳过检查（例如帧里根本没有张量），分配编译 id，调用 `_compile` 真正去编译")
def test_convert_frame_assert_skips_tensorless_frames_then_calls_compile():
    source = inspect.getsource(convert_frame.ConvertFrameAssert.__call__)
    assert "no tensor-related objects found in frame" in source
    assert source.index("get_compile_id(") < source.index("_compile(")


@backs("notebooks/05_dynamo.ipynb", "`explain()` 报告的编译耗时里就有一项 `bytecode_tracing`")
def test_explain_compile_times_include_bytecode_tracing():
    explained = torch._dynamo.explain(sin_affine)(torch.randn(8))
    assert "bytecode_tracing" in explained.compile_times


@backs("notebooks/05_dynamo.ipynb", "不带参数调用它，只是返回一个 `DisableContext` 对象")
def test_dynamo_disable_without_arguments_returns_a_context_and_turns_nothing_off():
    result = torch._dynamo.disable()
    counter = CompileCounter()
    torch.compile(sin_affine, backend=counter)(torch.randn(8))
    assert type(result) is eval_frame.DisableContext and counter.frame_count == 1


@backs("notebooks/05_dynamo.ipynb", "环境变量 `TORCH_COMPILE_DISABLE=1`")
def test_each_listed_way_turns_compilation_off():
    disabled = torch.compiler.disable(sin_affine)

    def calls_disabled(x):
        return disabled(x) + 1

    with torch.compiler.set_stance("force_eager"):
        torch.compile(sin_affine, backend="eager")(torch.randn(8))
    torch.compile(sin_affine, backend="eager", disable=True)(torch.randn(8))
    torch.compile(calls_disabled, backend="eager")(torch.randn(8))
    with config.patch(disable=True):                      # what TORCH_COMPILE_DISABLE=1 sets
        torch.compile(sin_affine, backend="eager")(torch.randn(8))
    assert _debug_get_cache_entry_list(sin_affine) == [] and _debug_get_cache_entry_list(calls_disabled)
    assert 'os.environ.get("TORCH_COMPILE_DISABLE", "0") == "1"' in inspect.getsource(config)


# --- 2.1 bytecode, per Python version --------------------------------------------------------------

@backs("notebooks/05_dynamo.ipynb", "`PRECALL n` 再 `CALL n`")
def test_calls_are_precall_call_on_311_call_on_312_and_call_kw_with_keywords_on_313():
    names = opnames(program("affine_relu")) + opnames(program("normalize"))
    assert ("PRECALL" in names) == (PY == (3, 11)) and "CALL" in names
    assert ("CALL_KW" in names) == (PY >= (3, 13))


@backs("notebooks/05_dynamo.ipynb", "`LOAD_METHOD sum`：弹出对象")
def test_method_loads_are_load_method_on_311_and_flagged_load_attr_from_312():
    mean = next(inst for inst in instructions(program("normalize")) if inst.argval == "mean")
    if PY == (3, 11):
        assert mean.opname == "LOAD_METHOD"
    else:
        assert mean.opname == "LOAD_ATTR" and mean.arg & 1
        assert mean.argrepr == ("NULL|self + mean" if PY == (3, 12) else "mean + NULL|self")


@backs("notebooks/05_dynamo.ipynb", "普通属性：`torch.nn`、`F.silu`")
def test_plain_attributes_are_load_attr_without_the_method_flag():
    gelu = load_program("def f(x):\n    return torch.nn.functional.gelu(x)\n")
    nn = next(inst for inst in instructions(gelu) if inst.argval == "nn")
    assert nn.opname == "LOAD_ATTR" and (PY == (3, 11) or not nn.arg & 1)


@backs("notebooks/05_dynamo.ipynb", "`dis` 显示为 `NULL + relu`：先压 `NULL` 再压函数")
def test_a_global_call_pushes_null_below_the_function_until_313():
    relu = next(inst for inst in instructions(program("imported")) if inst.argval == "relu")
    assert relu.opname == "LOAD_GLOBAL" and relu.arg & 1
    assert relu.argrepr == ("relu + NULL" if PY >= (3, 13) else "NULL + relu")


@backs("notebooks/05_dynamo.ipynb", "`PUSH_NULL`，在可调用对象之前")
def test_push_null_goes_before_the_callable_until_313_and_after_it_on_313():
    def call_local(f, y):
        return f(y)
    names = opnames(call_local)
    assert names.index("PUSH_NULL") == (1 if PY >= (3, 13) else 0)


@backs("notebooks/05_dynamo.ipynb", "`KW_NAMES i`：下一个 `CALL` 最后几个参数的名字是 `co_consts[i]`")
def test_keyword_names_are_kw_names_until_313_and_a_pushed_tuple_on_313():
    normalize = program("normalize")
    found = instructions(normalize)
    if PY >= (3, 13):
        call_kw = next(i for i, inst in enumerate(found) if inst.opname == "CALL_KW")
        assert found[call_kw - 1].opname == "LOAD_CONST" and found[call_kw - 1].argval == ("dim", "keepdim")
    else:
        kw_names = next(inst for inst in found if inst.opname == "KW_NAMES")
        assert normalize.__code__.co_consts[kw_names.arg] == ("dim", "keepdim")
        assert PY == (3, 11) or kw_names.argrepr == "('dim', 'keepdim')"


@backs("notebooks/05_dynamo.ipynb", "合并成 `LOAD_FAST_LOAD_FAST`（`inst.argval` 是两个名字的元组）")
def test_two_local_reads_on_one_line_merge_on_313():
    first = instructions(program("affine_relu"))[0]
    if PY >= (3, 13):
        assert first.opname == "LOAD_FAST_LOAD_FAST" and first.argval == ("x", "w")
    else:
        assert first.opname == "LOAD_FAST" and first.argval == "x"


@backs("notebooks/05_dynamo.ipynb", "可以是一条 `RETURN_CONST`")
def test_returning_a_constant_is_one_return_const_from_312():
    constant = load_program("def f(x):\n    return 1.0\n")
    assert ("RETURN_CONST" in opnames(constant)) == (PY >= (3, 12))


@backs("notebooks/05_dynamo.ipynb", "编译器对**导入的名字**不走取方法的路径")
def test_attributes_of_an_imported_module_are_plain_loads():
    silu = next(inst for inst in instructions(program("imported")) if inst.argval == "silu")
    imported_torch = load_program("import torch\n\ndef f(y):\n    return torch.relu(y)\n")
    relu = next(inst for inst in instructions(imported_torch) if inst.argval == "relu")
    for load in (silu, relu):
        assert load.opname == "LOAD_ATTR" and (PY == (3, 11) or not load.arg & 1)
    found = instructions(program("imported"))
    at = next(i for i, inst in enumerate(found) if inst.opname == "LOAD_GLOBAL" and inst.argval == "F")
    expected = ["LOAD_GLOBAL F", "LOAD_ATTR silu", "PUSH_NULL"] if PY >= (3, 13) else ["LOAD_GLOBAL NULL + F", "LOAD_ATTR silu"]
    assert [f"{inst.opname} {inst.argrepr}".strip() for inst in found[at:at + len(expected)]] == expected


@backs("notebooks/05_dynamo.ipynb", "本章的程序（`load_program`）里没有 `import torch`，`torch` 只是一个全局变量")
def test_torch_relu_in_a_chapter_program_takes_the_method_path():
    relu = next(inst for inst in instructions(program("affine_relu")) if inst.argval == "relu")
    assert relu.opname == "LOAD_METHOD" if PY == (3, 11) else (relu.opname == "LOAD_ATTR" and relu.arg & 1)


# --- 2.2 symbolic execution -------------------------------------------------------------------------

@backs("notebooks/05_dynamo.ipynb", "处理全部一百多种操作码")
def test_instruction_translator_has_over_a_hundred_opcode_handlers():
    handlers = [name for name in dir(symbolic_convert.InstructionTranslatorBase) if name.isupper()]
    assert 100 <= len(handlers) < 200


@backs("notebooks/05_dynamo.ipynb", "`TorchInGraphFunctionVariable` 代表 `torch.relu` 这样的函数")
def test_variable_trackers_the_chapter_names():
    assert all(hasattr(variables, name) for name in ("TensorVariable", "ConstantVariable"))
    assert trace_rules.lookup(torch.relu) is variables.TorchInGraphFunctionVariable


@backs("notebooks/05_dynamo.ipynb", "它带着一个**假张量**（fake tensor：有形状、dtype 和设备，没有数据）")
def test_the_values_dynamo_traces_with_are_fake_tensors():
    graphs = []
    torch.compile(sin_affine, backend=recording(graphs))(torch.randn(8))
    values = [node.meta["example_value"] for node in graphs[0].graph.nodes if node.op != "output"]
    assert values and all(isinstance(value, FakeTensor) for value in values)


@backs("notebooks/05_dynamo.ipynb", "得到的 FX 图（`GraphModule`）交给后端（`backend=`），后端返回一个可调用对象")
def test_the_backend_gets_a_graph_module():
    graphs = []
    torch.compile(sin_affine, backend=recording(graphs))(torch.randn(8))
    assert isinstance(graphs[0], fx.GraphModule)


@backs("notebooks/05_dynamo.ipynb", "InstructionTranslator.run() → step() 逐条符号执行")
def test_instruction_translator_runs_step_by_step():
    translator = symbolic_convert.InstructionTranslator
    assert callable(translator.run) and callable(translator.step)


# --- 2.3 and 2.4 rewritten bytecode and graph breaks ------------------------------------------------

@backs("notebooks/05_dynamo.ipynb", "名叫 `torch_dynamo_resume_in_one_print_at_…` 的**续行函数**")
def test_a_print_break_rewrites_the_function_and_one_resume_function():
    pairs = transformed_code(load_program(BREAK_PROGRAMS["one_print"]), torch.randn(4))
    names = [code.co_name for code, _ in pairs]
    assert names[0] == "one_print" and len(names) == 2 and names[1].startswith("torch_dynamo_resume_in_one_print_at_")


LOADED_GLOBALS_PROGRAM = """
import dis, json, torch
from course_models.ch05_models import BREAK_PROGRAMS, load_program, transformed_code
(_, new_code), _ = transformed_code(load_program(BREAK_PROGRAMS["one_print"]), torch.randn(4))
print(json.dumps({"globals": sorted({i.argval for i in dis.get_instructions(new_code) if i.opname == "LOAD_GLOBAL"}),
                  "constants": [repr(i.argval) for i in dis.get_instructions(new_code) if i.opname == "LOAD_CONST"]}))
"""


@backs("notebooks/05_dynamo.ipynb", "原函数的新字节码读取三类全局名字")
def test_the_new_bytecode_loads_the_graph_the_builtins_and_the_resume_function():
    # A fresh interpreter, as in the notebook: once a PrivateUse1 device is registered (the
    # toy chip, by other tests in this process), Dynamo also loads its stream bookkeeping.
    result = subprocess.run([sys.executable, "-c", LOADED_GLOBALS_PROGRAM], capture_output=True, text=True,
                            check=True, timeout=300)
    loaded = json.loads(result.stdout.splitlines()[-1])
    kinds = {"__compiled_fn", "__builtins_dict", "__resume_at", "__import_torch_dot__dynamo_dot_utils"}
    assert {next((k for k in kinds if name.startswith(k)), name) for name in loaded["globals"]} == kinds
    assert "'print'" in loaded["constants"]


@backs("notebooks/05_dynamo.ipynb", "在性能分析器（profiler）打开时把图之前的那段字节码标成一个区间")
def test_dynamo_utils_global_marks_the_pregraph_bytecode_for_the_profiler():
    (_, new_code), = transformed_code(sin_affine, torch.randn(4))
    assert "__import_torch_dot__dynamo_dot_utils" in loaded_globals(new_code)
    source = inspect.getsource(torch._dynamo.utils.record_pregraph_bytecode_enter)
    assert "_RecordFunctionFast" in source and "_is_profiler_enabled" in source


@backs("notebooks/05_dynamo.ipynb", "explain 会再编译一遍、再装一套名字，所以上面先数")
def test_each_compile_installs_one_global_per_graph_and_per_resume_function():
    two_breaks = load_program(BREAK_PROGRAMS["two_breaks"])

    def installed():
        return sorted(name for name in two_breaks.__globals__ if name.startswith(("__compiled_fn", "__resume_at")))

    torch.compile(two_breaks, backend="eager")(torch.randn(4))
    first = installed()
    assert sum(name.startswith("__compiled_fn") for name in first) == 3 and len(first) == 5
    torch._dynamo.explain(two_breaks)(torch.randn(4))
    assert set(installed()) - set(first)


@backs("notebooks/05_dynamo.ipynb", "`torch._dynamo.config.suppress_errors` 默认是 `False`，后端抛出的异常被包成 `BackendCompilerFailed`")
def test_a_failing_backend_raises_backend_compiler_failed_by_default():
    def broken_backend(gm, example_inputs):
        raise RuntimeError("broken")
    assert config.suppress_errors is False
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed):
        torch.compile(sin_affine, backend=broken_backend)(torch.randn(8))


@backs("notebooks/05_dynamo.ipynb", "`ConvertFrame` 才把错误记成一条警告日志、让这个帧由 Python 照常运行")
def test_suppressed_errors_are_logged_as_a_warning_and_the_frame_runs_in_python():
    def broken_backend(gm, example_inputs):
        raise RuntimeError("broken")
    x = torch.randn(8)
    with config.patch(suppress_errors=True), logged("torch._dynamo.convert_frame") as records:
        out = torch.compile(sin_affine, backend=broken_backend)(x)
    assert torch.equal(out, sin_affine(x))
    assert any(r.levelno == logging.WARNING and "WON'T CONVERT" in r.getMessage() for r in records)


@backs("notebooks/05_dynamo.ipynb", "整个帧里没有捕获到任何张量运算（Dynamo 跳过这个帧）")
def test_a_frame_without_tensor_operations_is_skipped():
    def identity(x):
        return x
    counter = CompileCounter()
    torch.compile(identity, backend=counter)(torch.randn(3))
    assert config.allow_empty_graphs is False and counter.frame_count == 0


def helper(y):
    return y.cos() + 1


def one_op_before_try(x):
    y = x.sin()
    try:
        torch._dynamo.graph_break()
    except ValueError:
        pass
    return helper(y) * 2


def two_ops_before_try(x):
    y = x.sin() + 1
    try:
        torch._dynamo.graph_break()
    except ValueError:
        pass
    return y.cos() * 2


def two_ops_before_with(x):
    y = x.sin() + 1
    with torch.no_grad():
        torch._dynamo.graph_break()
    return y.cos() * 2


def graph_ops(graphs) -> list[list[str]]:
    return [[n.target if n.op == "call_method" else n.target.__name__ for n in gm.graph.nodes
             if n.op in ("call_function", "call_method")] for gm in graphs]


def break_reasons(fn, calls: int = 1) -> tuple[list[list[str]], list[str], int]:
    """The graphs' ops, the graph-break reasons logged and the frames Dynamo was handed,
    over ``calls`` calls of ``torch.compile(fn)``."""
    graphs = []
    compiled = torch.compile(fn, backend=recording(graphs))
    frames_before = counters["frames"]["total"]
    with dynamo_log("graph_breaks") as messages:
        for _ in range(calls):
            compiled(torch.randn(4))
    reasons = [line for message in messages for line in message.splitlines() if "Graph Break Reason" in line]
    return graph_ops(graphs), reasons, counters["frames"]["total"] - frames_before


@backs("notebooks/05_dynamo.ipynb", "Dynamo 只会重建 `with` 块的上下文")
def test_a_break_resumes_inside_a_with_block_but_not_inside_a_try_block():
    assert symbolic_convert.BlockStackEntry(None, None, 0).can_restore() is False   # only a with context restores
    resumed = transformed_code(two_ops_before_with, torch.randn(4))
    not_resumed = transformed_code(two_ops_before_try, torch.randn(4))
    assert len(resumed) == 2 and len(not_resumed) == 1
    assert not any(name.startswith("__resume_at") for name in loaded_globals(not_resumed[0][1]))


@backs("notebooks/05_dynamo.ipynb", "`should_compile_partial_graph` 返回 `False`")
def test_should_compile_partial_graph_refuses_an_instruction_in_a_try_block():
    source = inspect.getsource(symbolic_convert.InstructionTranslatorBase.should_compile_partial_graph)
    assert "exn_tab_entry" in source and "block_stack[-1].target" in source and "return False" in source


@backs("notebooks/05_dynamo.ipynb", "值栈为空、不在 `try` 块里、图里已经有至少两个运算的指令处记下检查点")
def test_a_checkpoint_needs_an_empty_stack_a_partial_graph_and_two_ops():
    step = inspect.getsource(symbolic_convert.InstructionTranslatorBase.step)
    assert "not self.stack" in step and "self.should_compile_partial_graph()" in step and "self.is_non_empty_graph()" in step
    assert "count_calls() > 1" in inspect.getsource(symbolic_convert.InstructionTranslatorBase.is_non_empty_graph)
    assert break_reasons(one_op_before_try)[0] == [["cos", "add"]]       # one op: no checkpoint
    assert break_reasons(two_ops_before_try)[0] == [["sin", "add"]]      # two ops: a checkpoint


@backs("notebooks/05_dynamo.ipynb", "`Compiling up to the previous resumable state, then skipping the rest of the function`")
def test_with_a_checkpoint_dynamo_compiles_up_to_it_and_python_runs_the_rest():
    graphs, reasons, _ = break_reasons(two_ops_before_try)
    assert graphs == [["sin", "add"]]                                     # y.cos() * 2 is in no graph
    assert len(reasons) == 1 and "Compiling up to the previous resumable state, then skipping the rest of the function" in reasons[0]


@backs("notebooks/05_dynamo.ipynb", "`Skipping the function and falling back to eager`")
def test_without_a_checkpoint_the_frame_is_skipped():
    graphs, reasons, _ = break_reasons(one_op_before_try)
    assert "sin" not in sum(graphs, [])
    assert len(reasons) == 1 and "Skipping the function and falling back to eager" in reasons[0]


@backs("notebooks/05_dynamo.ipynb", "以后的调用也不再尝试编译它；它调用的函数照常被截住、编译")
def test_a_skipped_frame_is_not_tried_again_and_its_callees_still_compile():
    graphs, _, frames = break_reasons(one_op_before_try, calls=3)
    assert graphs == [["cos", "add"]] and frames == 2                   # the function once, helper once


@backs("notebooks/05_dynamo.ipynb", "续行函数是**新的帧**：它有自己的缓存条目和守卫")
def test_a_resume_function_has_cache_entries_of_its_own():
    one_print = load_program(BREAK_PROGRAMS["one_print"])
    pairs = []
    handle = register_bytecode_hook(lambda code, new_code: pairs.append(code))
    try:
        with quiet_dynamo():
            torch.compile(one_print, backend="eager")(torch.randn(4))
        resume_code = pairs[1]
        assert len(_debug_get_cache_entry_list(resume_code)) == 1
        assert len(_debug_get_cache_entry_list(one_print)) == 1
    finally:
        handle.remove()


@backs("notebooks/05_dynamo.ipynb", "两个分支各有一个续行函数，但只有真正走到的那个会被编译")
def test_a_value_branch_references_two_resume_functions_and_compiles_one():
    pairs = transformed_code(load_program(BREAK_PROGRAMS["value_branch"]), torch.ones(4))
    resumes = {name for name in loaded_globals(pairs[0][1]) if name.startswith("__resume_at")}
    assert len(resumes) == 2 and len(pairs) == 2


@backs("notebooks/05_dynamo.ipynb", "两个续行函数的代码对象同名")
def test_the_two_branches_resume_functions_share_a_code_name():
    fn = load_program(BREAK_PROGRAMS["value_branch"])
    pairs = transformed_code(fn, torch.ones(4))
    resumes = [fn.__globals__[name].__code__ for name in loaded_globals(pairs[0][1]) if name.startswith("__resume_at")]
    assert len(resumes) == 2 and resumes[0] is not resumes[1]
    assert resumes[0].co_name == resumes[1].co_name and resumes[0].co_name.startswith("torch_dynamo_resume_in_value_branch_at_")


# --- 2.5 the ATen graph behind a backend ------------------------------------------------------------

def aten_graphs(fn, *args, **aot_options) -> list[fx.GraphModule]:
    """The graphs AOTAutograd hands its forward compiler while ``fn`` compiles and runs twice."""
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    compiled = torch.compile(fn, backend=aot_autograd(fw_compiler=keep, **aot_options))
    with quiet_dynamo():
        compiled(*args)
        compiled(*args)
    return graphs


def aten_targets(gm) -> list[str]:
    return [str(node.target) for node in gm.graph.nodes if node.op == "call_function"]


@backs("notebooks/05_dynamo.ipynb", "记下的每个节点都是一个 **ATen 算子重载**（operator overload），例如 `aten.mm.default`")
def test_aot_autograd_hands_its_compiler_one_aten_graph_of_op_overloads_per_dynamo_graph():
    graphs = aten_graphs(load_program(BREAK_PROGRAMS["two_breaks"]), torch.randn(4))
    assert [aten_targets(gm) for gm in graphs] == [["aten.mul.Tensor"], ["aten.relu.default", "aten.add.Tensor"],
                                                   ["aten.sum.default"]]
    assert all(isinstance(node.target, torch._ops.OpOverload) for gm in graphs for node in gm.graph.nodes
               if node.op == "call_function")
    assert str(torch.ops.aten.mm.default) == "aten.mm.default" and str(torch.ops.aten.mean) == "aten.mean"


@backs("notebooks/05_dynamo.ipynb", "AOTAutograd 用假张量把这张图再追踪一遍")
def test_aot_autograd_traces_with_fake_tensors():
    seen = []

    def keep(gm, example_inputs):
        seen.extend(example_inputs)
        return gm.forward
    torch.compile(sin_affine, backend=aot_autograd(fw_compiler=keep))(torch.randn(4))
    assert seen and all(isinstance(value, FakeTensor) for value in seen)


@backs("notebooks/05_dynamo.ipynb", "`F.linear` 是转置加一次 `addmm`")
def test_linear_is_a_transpose_and_an_addmm_in_aten():
    def linear(x, w, b):
        return torch.nn.functional.linear(x, w, b)
    gm, = aten_graphs(linear, torch.randn(4, 4), torch.randn(4, 4), torch.randn(4))
    assert aten_targets(gm) == ["aten.t.default", "aten.addmm.default"]


@backs("notebooks/05_dynamo.ipynb", "这里只用 AOTAutograd 的默认行为")
def test_aot_autograd_decomposes_only_when_given_a_decomposition_table():
    from torch._decomp import core_aten_decompositions

    def linear_silu(x, w):
        return torch.nn.functional.silu(torch.nn.functional.linear(x, w))
    args = torch.randn(4, 4), torch.randn(4, 4)
    default, = aten_graphs(linear_silu, *args)
    torch._dynamo.reset()
    core, = aten_graphs(linear_silu, *args, decompositions=core_aten_decompositions())
    assert aten_targets(default) == ["aten.t.default", "aten.mm.default", "aten.silu.default"]
    assert aten_targets(core) == ["aten.permute.default", "aten.mm.default", "aten.sigmoid.default", "aten.mul.Tensor"]


@backs("notebooks/05_dynamo.ipynb", "需要梯度时它还生成反向图")
def test_aot_autograd_compiles_a_backward_graph_when_gradients_are_needed():
    compiled = []

    def keep(kind):
        def compiler(gm, example_inputs):
            compiled.append(kind)
            return gm.forward
        return compiler
    backend = aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))
    torch.compile(sin_affine, backend=backend)(torch.randn(4, requires_grad=True)).sum().backward()
    assert compiled == ["forward", "backward"]


@backs("notebooks/05_dynamo.ipynb", "Inductor 自己也是这样接上 Dynamo 的")
def test_inductor_joins_dynamo_through_aot_autograd():
    source = function_source(TORCH_ROOT / "_inductor" / "compile_fx.py", "_compile_fx_main")
    assert "dynamo_common.aot_autograd(" in source


# --- 3. guards -----------------------------------------------------------------------------------

@backs("notebooks/05_dynamo.ipynb", "C 代码把它挂在代码对象的 extra 区域里")
def test_the_cache_lives_on_the_code_objects_extra_scratch_space():
    assert "Our cache resides on the extra scratch space of the code object" in (DYNAMO_HEADERS / "cache_entry.h").read_text()


@backs("notebooks/05_dynamo.ipynb", "改写后的代码 `code`、守卫 `guard_manager`、编译 id `compile_id`")
def test_a_cache_entry_holds_code_guard_manager_compile_id_and_backend():
    torch.compile(scale_shift, backend="eager")(ones_x(), 2, True)
    entry, = _debug_get_cache_entry_list(scale_shift)
    assert entry.code.co_name == "scale_shift" and str(entry.compile_id) == "0/0"
    assert entry.guard_manager.check({"x": ones_x(), "n": 2, "flag": True}) and entry.backend is not None


@backs("notebooks/05_dynamo.ipynb", "根上是全局状态（梯度模式、默认 dtype、`torch.function` 模式……）")
def test_the_guard_tree_root_checks_global_state():
    torch.compile(scale_shift, backend="eager")(ones_x(), 2, True)
    root_lines = [line for line in guards_text(scale_shift).splitlines() if line.startswith("| +- ")]
    global_state = next(line for line in root_lines if "GLOBAL_STATE" in line)
    assert '"grad_mode"' in global_state and '"default_dtype"' in global_state
    assert any("TORCH_FUNCTION_MODE_STACK" in line for line in root_lines)


@backs("notebooks/05_dynamo.ipynb", "张量的类型、分发键集合、dtype、设备、`requires_grad`、形状和步长都要一样")
def test_tensor_match_checks_type_keys_dtype_device_requires_grad_size_and_stride():
    torch.compile(scale_shift, backend="eager")(ones_x(), 2, True)
    assert re.search(r"TENSOR_MATCH: check_tensor\(L\['x'\], Tensor, DispatchKeySet\(.*\), torch\.float32, "
                     r"device=None, requires_grad=False, size=\[4\], stride=\[1\]\)", guards_text(scale_shift))


@backs("notebooks/05_dynamo.ipynb", "`EQUALS_MATCH: L['n'] == 2`：Python 整数被当作**常量**烧进了图")
def test_scale_shift_guards_pin_n_flag_and_torch_relu():
    torch.compile(scale_shift, backend="eager")(ones_x(), 2, True)
    text = guards_text(scale_shift)
    assert "EQUALS_MATCH: L['n'] == 2" in text and "TRUE_MATCH: L['flag'] == True" in text
    assert re.search(r"ID_MATCH: ___check_obj_id\(G\['torch'\]\.relu,", text)


@backs("notebooks/05_dynamo.ipynb", "在 `torch.no_grad()` 下调用同一个函数会重新编译")
def test_calling_under_no_grad_recompiles():
    counter = CompileCounter()
    compiled = torch.compile(scale_shift, backend=counter)
    compiled(ones_x(), 2, True)
    with torch.no_grad():
        compiled(ones_x(), 2, True)
    assert counter.frame_count == 2


@backs("notebooks/05_dynamo.ipynb", "C 代码把最近命中或新建的条目放到最前")
def test_a_new_or_hit_entry_moves_to_the_front():
    compiled = torch.compile(scale_shift, backend="eager")
    compiled(ones_x(), 2, True)
    compiled(ones_x(), 2, False)
    assert compile_ids(scale_shift) == ["0/1", "0/0"]
    compiled(ones_x(), 2, True)
    assert compile_ids(scale_shift) == ["0/0", "0/1"]


@backs("notebooks/05_dynamo.ipynb", "它对 `n` 只有 `TYPE_MATCH`")
def test_after_a_second_n_the_new_entry_only_checks_its_type():
    compiled = torch.compile(scale_shift, backend="eager")
    compiled(ones_x(), 2, True)
    compiled(ones_x(), 5, True)
    newest = guards_text(scale_shift, 0)
    assert "TYPE_MATCH: ___check_type_id(L['n']" in newest and "EQUALS_MATCH: L['n']" not in newest


@backs("notebooks/05_dynamo.ipynb", "把 `n` 变成了图的一个符号输入（`SymInt`）")
def test_automatic_dynamic_makes_n_a_symint_input_of_the_graph():
    graphs = []
    compiled = torch.compile(scale_shift, backend=recording(graphs))
    compiled(ones_x(), 2, True)
    compiled(ones_x(), 5, True)
    inputs = [node.meta.get("example_value") for node in graphs[1].graph.find_nodes(op="placeholder")]
    assert any(isinstance(value, torch.SymInt) for value in inputs)


@backs("notebooks/05_dynamo.ipynb", "`torch._logging.set_logs(guards=True, recompiles=True)`")
def test_set_logs_takes_the_guards_recompiles_and_bytecode_artifacts():
    parameters = inspect.signature(torch._logging.set_logs).parameters
    assert {"guards", "recompiles", "bytecode"} <= set(parameters)


@backs("notebooks/05_dynamo.ipynb", "默认的 `dynamic=None` 编译 2 次（先静态、再动态）")
def test_the_strategies_compile_counts_on_the_chapters_batch_sequence():
    batch_mlp = BATCH_MODELS["batch_mlp"]
    batches = [8] + torch.randint(2, 65, (11,), generator=torch.Generator().manual_seed(0)).tolist()
    w = torch.randn(FEATURES, FEATURES)

    def compiles(dynamic, mark=False) -> int:
        torch._dynamo.reset()
        counter = CompileCounter()
        compiled = torch.compile(batch_mlp, backend=counter, dynamic=dynamic)
        with quiet_dynamo():
            for batch in batches:
                x = torch.randn(batch, FEATURES)
                if mark:
                    torch._dynamo.mark_dynamic(x, 0)
                compiled(x, w)
        return counter.frame_count

    assert len(set(batches)) > config.recompile_limit
    assert [compiles(False), compiles(None), compiles(True), compiles(None, mark=True)] == [8, 2, 2, 1]


@backs("notebooks/05_dynamo.ipynb", "到重新编译上限（8）后进入只运行模式")
def test_the_default_recompile_limit_is_8():
    assert config.recompile_limit == 8


@backs("notebooks/05_dynamo.ipynb", "把这个代码对象切换到**只运行**（run-only）模式")
def test_past_the_recompile_limit_cached_entries_still_run_and_misses_run_in_python():
    runs = []
    compiled = torch.compile(scale_shift, backend=counting_runs(runs), dynamic=False)
    with config.patch(recompile_limit=3), logged("torch._dynamo.convert_frame") as records:
        for n in (2, 3, 4, 5):
            compiled(ones_x(), n, True)
        before = len(runs)
        compiled(ones_x(), 2, True)
        hit_ran_the_graph = len(runs) == before + 1
        out = compiled(ones_x(), 9, True)
    assert len(_debug_get_cache_entry_list(scale_shift)) == 3 and hit_ran_the_graph and len(runs) == before + 1
    assert torch.equal(out, scale_shift(ones_x(), 9, True))
    assert any("hit config.recompile_limit" in r.getMessage() for r in records if r.levelno == logging.WARNING)


@backs("notebooks/05_dynamo.ipynb", "重新编译上限在 `_compile` 里检查")
def test_the_recompile_limit_is_checked_in_compile():
    assert "exceeds_recompile_limit(" in inspect.getsource(convert_frame._compile)


@backs("notebooks/05_dynamo.ipynb", "守卫树在检查失败时把失败的子节点移到前面")
def test_a_failing_guard_subtree_moves_to_the_front():
    torch.compile(scale_shift, backend="eager")(ones_x(), 2, True)
    entry, = _debug_get_cache_entry_list(scale_shift)
    root = entry.guard_manager.root
    assert root.get_child_managers()[0].get_source() != "L['flag']"
    for _ in range(2):
        assert not entry.guard_manager.check({"x": ones_x(), "n": 2, "flag": False})
    first = root.get_child_managers()[0]
    assert first.get_source() == "L['flag']" and first.fail_count() == 2


@backs("notebooks/05_dynamo.ipynb", '`"force_eager"` 换成 `None`')
def test_force_eager_hands_c_no_callback():
    with torch.compiler.set_stance("force_eager"):
        assert eval_frame._callback_from_stance(object()) is None


@backs("notebooks/05_dynamo.ipynb", '`"eager_on_recompile"` 换成 `False`，C 代码只查缓存、不编译')
def test_eager_on_recompile_hands_c_false_which_looks_up_but_never_compiles():
    runs = []
    counter = CompileCounter()

    def backend(gm, example_inputs):
        counter(gm, example_inputs)
        return counting_runs(runs)(gm, example_inputs)

    compiled = torch.compile(scale_shift, backend=backend, dynamic=False)
    compiled(ones_x(), 2, True)
    with torch.compiler.set_stance("eager_on_recompile"):
        assert eval_frame._callback_from_stance(object()) is False
        compiled(ones_x(), 2, True)
        compiled(ones_x(), 5, True)
    assert counter.frame_count == 1 and len(runs) == 2


def blend_example() -> dict:
    return {"x": torch.randn(4, 4), "y": None, "alpha": 2, "mode": "none", "shifts": [1, 2], "note": "first"}


def blend_entry(example: dict):
    torch.compile(blend, backend=CompileCounter())(**example)
    entry, = _debug_get_cache_entry_list(blend)
    return entry


@backs("notebooks/05_dynamo.ipynb", "`GuardBuilder`（`guards.py`，第 5 节）就在它的来历上加相应的守卫：图依赖的东西守住，图不依赖的不守")
def test_blends_guards_follow_what_the_trace_read():
    blend_entry(blend_example())
    text = guards_text(blend)
    assert "NONE_MATCH: L['y'] is None" in text and "EQUALS_MATCH: L['mode'] == 'none'" in text
    assert "LENGTH_CHECK: len(L['shifts']) == 2" in text and "EQUALS_MATCH: L['shifts'][0] == 1" in text
    assert "L['note']" not in text


@backs("notebooks/05_dynamo.ipynb", "所以守卫是\"这张图在哪些假设下是对的\"的清单")
def test_blends_entry_accepts_new_values_and_another_note_only():
    example = blend_example()
    entry = blend_entry(example)
    accepted = {label: entry.guard_manager.check({**example, **change}) for label, change in {
        "values": {"x": torch.randn(4, 4)}, "note": {"note": None}, "transposed": {"x": torch.randn(4, 4).t()},
        "grad": {"x": torch.randn(4, 4, requires_grad=True)}, "float alpha": {"alpha": 2.0},
        "other string": {"mode": "tanh"}, "tuple": {"shifts": (1, 2)}, "element": {"shifts": [1, 3]},
        "y": {"y": torch.randn(4)}}.items()}
    assert accepted == {"values": True, "note": True, "transposed": False, "grad": False, "float alpha": False,
                        "other string": False, "tuple": False, "element": False, "y": False}


# --- 4. dynamic shapes ---------------------------------------------------------------------------

@backs("notebooks/05_dynamo.ipynb", "一开始就把**所有**尺寸（和整数参数）当作动态")
def test_dynamic_true_makes_sizes_and_ints_dynamic_from_the_start():
    counter = CompileCounter()
    compiled = torch.compile(scale_shift, backend=counter, dynamic=True)
    compiled(ones_x(4), 2, True)
    compiled(ones_x(6), 5, True)
    assert counter.frame_count == 1


@backs("notebooks/05_dynamo.ipynb", "某个尺寸和**第一次编译时**的值不同，就把它标为动态再编译")
def test_automatic_dynamic_recompiles_once_with_the_changed_size_dynamic():
    def double(x):
        return x * 2
    counter = CompileCounter()
    compiled = torch.compile(double, backend=counter)
    compiles = []
    for length in (4, 6, 8):
        before = counter.frame_count
        compiled(torch.randn(length))
        compiles.append(counter.frame_count > before)
    assert config.automatic_dynamic_shapes and compiles == [True, True, False]


@backs("notebooks/05_dynamo.ipynb", "（可选 `min=`、`max=`）")
def test_mark_dynamic_takes_min_and_max():
    parameters = inspect.signature(torch._dynamo.mark_dynamic).parameters
    assert {"min", "max"} <= set(parameters) and callable(torch._dynamo.mark_static)


@backs("notebooks/05_dynamo.ipynb", "大小为 0 或 1 的维度总是按常数处理")
def test_sizes_0_and_1_are_specialized_even_with_dynamic_true():
    def double(x):
        return x * 2
    counter = CompileCounter()
    compiled = torch.compile(double, backend=counter, dynamic=True)
    compiles = []
    for length in (1, 0, 5, 9):
        before = counter.frame_count
        compiled(torch.randn(length))
        compiles.append(counter.frame_count > before)
    texts = [str(entry.guard_manager) for entry in _debug_get_cache_entry_list(double)]
    assert compiles == [True, True, True, False]
    assert "size=[None]" in texts[0] and "2 <= L['x'].size()[0]" in texts[0]
    assert "size=[0]" in texts[1] and "size=[1]" in texts[2]


@backs("notebooks/05_dynamo.ipynb", "编译时两个尺寸**恰好相等**，Dynamo 就假定它们永远相等")
def test_duck_sizing_gives_equal_sizes_one_symbol_and_an_equality_guard():
    def matmul(x, w):
        return x @ w
    torch.compile(matmul, backend="eager", dynamic=True)(torch.randn(8, 8), torch.randn(8, 8))
    assert torch.fx.experimental._config.use_duck_shape
    assert "L['w'].size()[0] == L['x'].size()[0]" in guards_text(matmul)


@backs("notebooks/05_dynamo.ipynb", "下一次批大小是 16 就要重新编译")
def test_a_duck_sized_square_recompiles_for_batch_16():
    def matmul(x, w):
        return x @ w
    counter = CompileCounter()
    compiled = torch.compile(matmul, backend=counter, dynamic=True)
    compiled(torch.randn(8, 8), torch.randn(8, 8))
    compiled(torch.randn(16, 8), torch.randn(8, 8))
    assert counter.frame_count == 2


def fill_ones(x):
    n = (x > 0).sum().item()
    return torch.ones(n) / n


def fill_or_zero(x):
    n = (x > 0).sum().item()
    if n == 0:
        return torch.zeros(1)
    return torch.ones(n) / n


def fill_checked(x):
    n = (x > 0).sum().item()
    torch._check(n > 0)
    if n == 0:
        return torch.zeros(1)
    return torch.ones(n) / n


HALF_POSITIVE = torch.linspace(-1, 1, 8)   # fill_checked's runtime assert needs a positive value


def unbacked_graph(fn, **settings):
    graphs = []
    with config.patch(capture_scalar_outputs=True, **settings):
        torch.compile(fn, backend=recording(graphs), fullgraph=True)(HALF_POSITIVE)
    return graphs[0]


@backs("notebooks/05_dynamo.ipynb", "`.item()` 默认让图中断")
def test_item_breaks_the_graph_by_default():
    with quiet_dynamo():
        explained = torch._dynamo.explain(fill_ones)(torch.randn(8))
    assert config.capture_scalar_outputs is False and explained.graph_break_count == 1


@backs("notebooks/05_dynamo.ipynb", "Dynamo 还记一条警告（logging 的 WARNING，平时打到 stderr；每个进程只记一次）")
def test_an_item_break_warns_once_per_process():
    warn = variables.tensor.TensorVariable._warn_capture_scalar_outputs
    warn.cache_clear()                               # functools.cache: once per process
    warnings = []
    for _ in range(2):
        torch._dynamo.reset()
        with logged("torch._dynamo") as records:
            torch._dynamo.explain(fill_ones)(torch.randn(8))
        warnings.append([r for r in records if r.levelno == logging.WARNING and "Tensor.item()" in r.getMessage()])
    assert [len(found) for found in warnings] == [1, 0]
    assert warnings[0][0].getMessage().startswith("Graph break from `Tensor.item()`, consider setting:")


@backs("notebooks/05_dynamo.ipynb", "`u0` 出现在节点的值和形状里")
def test_a_captured_item_is_the_unbacked_symbol_u0():
    values = values_of(unbacked_graph(fill_ones))
    assert str(values["item"]) == "u0" and [str(size) for size in values["ones"]] == ["u0"]


@backs("notebooks/05_dynamo.ipynb", "例如 `x.nonzero()` 的行数")
def test_the_rows_of_nonzero_are_an_unbacked_symbol():
    def nonzero(x):
        return x.nonzero() + 1
    graphs = []
    torch.compile(nonzero, backend=recording(graphs), fullgraph=True)(torch.randn(8))
    rows = values_of(graphs[0])["nonzero"][0]
    assert str(rows) == "u0"


@backs("notebooks/05_dynamo.ipynb", "运行时检查 `u0 >= 0`")
def test_an_unbacked_length_gets_a_nonnegative_runtime_assert():
    values = values_of(unbacked_graph(fill_ones))
    assert "u0 >= 0" in [str(value) for value in values.values()]
    assert any(name.startswith("_assert_scalar") for name in values)


@backs("notebooks/05_dynamo.ipynb", "`if n == 0:` 在 `fullgraph=True` 下直接报错")
def test_branching_on_an_unbacked_symbol_fails_under_fullgraph():
    with pytest.raises(torch._dynamo.exc.UserError, match="Could not guard on data-dependent expression"):
        unbacked_graph(fill_or_zero)


@backs("notebooks/05_dynamo.ipynb", "不加 `fullgraph` 就是一次图中断")
def test_branching_on_an_unbacked_symbol_breaks_the_graph_without_fullgraph():
    with config.patch(capture_scalar_outputs=True):
        assert torch._dynamo.explain(fill_or_zero)(torch.randn(8)).graph_break_count == 1


@backs("notebooks/05_dynamo.ipynb", "用 `torch._check(n > 0)` 向编译器保证")
def test_torch_check_decides_the_branch_and_becomes_a_runtime_assert():
    code = unbacked_graph(fill_checked).code
    assert "zeros" not in code and "_assert_scalar" in code and "u0 > 0" in code


STORM_CALLS = [(8, 0.5), (16, 0.25), (3, 1.5), (1, 0.7), (40, 0.3)]


def storm_compiles(prepare=lambda x, scale: (x, scale)) -> tuple[int, list[str]]:
    """Compiles of ``storm_mlp`` over the chapter's calls, and the failed guards logged."""
    w = torch.randn(FEATURES, FEATURES)
    counter = CompileCounter()
    compiled = torch.compile(STORM_MODELS["storm_mlp"], backend=counter)
    with dynamo_log("recompiles") as messages:
        for batch, scale in STORM_CALLS:
            x, scale = prepare(torch.randn(batch, FEATURES), scale)
            compiled(x, w, scale)
    failures = [line.strip() for message in messages for line in message.splitlines()]
    return counter.frame_count, [line for line in failures if line.startswith("- 0/")]


def marked_dynamic(x, scale):
    torch._dynamo.mark_dynamic(x, 0)
    return x, scale


@backs("notebooks/05_dynamo.ipynb", "每修好一类失败的守卫，日志里会出现下一类")
def test_each_fix_of_the_storm_shows_the_next_failing_guard():
    count, failures = storm_compiles()
    assert count == 3 and "size mismatch at index 0" in failures[0] and "2 <= x.size()[0]" in failures[1]
    torch._dynamo.reset()
    count, failures = storm_compiles(marked_dynamic)
    assert count == 3 and failures[0].startswith("- 0/0: scale == 0.5")
    torch._dynamo.reset()
    count, failures = storm_compiles(lambda x, scale: marked_dynamic(x, torch.tensor(scale)))
    assert count == 2 and failures[0].startswith("- 0/0: 2 <= x.size()[0]")


@backs("notebooks/05_dynamo.ipynb", "一个 Python 浮点数先被当作常量特化，第二个值出现时才变成动态的；传成张量，它从一开始就是图的输入")
def test_a_float_is_specialised_then_dynamic_and_a_tensor_scale_never_recompiles():
    w, x = torch.randn(FEATURES, FEATURES), torch.randn(4, FEATURES)
    for scale_of, expected in ((float, 2), (torch.tensor, 1)):
        torch._dynamo.reset()
        counter = CompileCounter()
        compiled = torch.compile(STORM_MODELS["storm_mlp"], backend=counter)
        for scale in (0.5, 0.25, 1.5):
            compiled(x, w, scale_of(scale))
        assert counter.frame_count == expected
    graphs = []
    torch._dynamo.reset()
    compiled = torch.compile(STORM_MODELS["storm_mlp"], backend=recording(graphs))
    for scale in (0.5, 0.25):
        compiled(x, w, scale)
    assert [len([n for n in gm.graph.nodes if n.op == "placeholder"]) for gm in graphs] == [2, 3]


@backs("notebooks/05_dynamo.ipynb", "`mark_unbacked` 标记的维度也没有 0/1 特化")
@backs("notebooks/05_dynamo.ipynb", "`torch._dynamo.decorators` 里除了 `mark_dynamic`、`mark_static` 还有别的标记")
def test_an_unbacked_batch_and_a_tensor_scale_compile_the_storm_once():
    def unbacked(x, scale):
        torch._dynamo.decorators.mark_unbacked(x, 0)
        return x, torch.tensor(scale)
    assert storm_compiles(unbacked) == (1, [])


# --- 5. source files -------------------------------------------------------------------------------

@backs("notebooks/05_dynamo.ipynb", "在 2.13 的源码里找到 `eval_frame.py`、`convert_frame.py`、`symbolic_convert.py`、`guards.py` 和 C 代码 `eval_frame.c` 的职责")
def test_the_files_the_chapter_walks_through_exist():
    dynamo = TORCH_ROOT / "_dynamo"
    assert all((dynamo / name).is_file() for name in ("eval_frame.py", "convert_frame.py", "symbolic_convert.py",
                                                      "guards.py", "output_graph.py", "resume_execution.py",
                                                      "bytecode_transformation.py"))
    assert library_has("torch/csrc/dynamo/eval_frame.c") == [True]


@backs("notebooks/05_dynamo.ipynb", "帧求值函数 `dynamo_custom_eval_frame_shim`")
def test_the_c_frame_evaluation_function_and_its_cpp_callee():
    assert "dynamo__custom_eval_frame(" in (DYNAMO_HEADERS / "eval_frame_cpp.h").read_text()
    assert library_has("dynamo_custom_eval_frame_shim", "dynamo__custom_eval_frame", "eval_frame_cpp.cpp",
                       "extra_state.cpp", "cache_entry.cpp") == [True] * 5


@backs("notebooks/05_dynamo.ipynb", "wheel 里没有这些 `.c`、`.cpp` 源文件，但带着它们的头文件")
def test_the_wheel_ships_the_dynamo_headers_but_not_the_sources():
    shipped = {path.name for path in DYNAMO_HEADERS.iterdir()}
    assert {"cache_entry.h", "extra_state.h", "eval_frame.h", "eval_frame_cpp.h"} <= shipped
    assert not [path for path in TORCH_ROOT.rglob("eval_frame*") if path.suffix in (".c", ".cpp")]


@backs("notebooks/05_dynamo.ipynb", "lookup(extra_state, f_locals, ...)")
def test_extra_state_declares_lookup_move_to_front_and_create_cache_entry():
    header = (DYNAMO_HEADERS / "extra_state.h").read_text()
    assert "void lookup(" in header and "move_to_front(" in header and "create_cache_entry(" in header


@backs("notebooks/05_dynamo.ipynb", "和 Python 里的 `entry.guard_manager.check(局部变量字典)` 是同一个检查")
def test_a_call_recompiles_exactly_when_no_entrys_guard_manager_check_passes():
    counter = CompileCounter()
    compiled = torch.compile(scale_shift, backend=counter)
    for n, flag, size in [(2, True, 4), (5, True, 4), (2, False, 4), (7, True, 6), (2, False, 4), (3, True, 1)]:
        frame_locals = {"x": ones_x(size), "n": n, "flag": flag}
        passes = any(entry.guard_manager.check(frame_locals) for entry in _debug_get_cache_entry_list(scale_shift))
        before = counter.frame_count
        compiled(*frame_locals.values())
        assert passes == (counter.frame_count == before)


@backs("notebooks/05_dynamo.ipynb", "和第 2.3 节钩子拿到的是同一份")
def test_the_bytecode_log_shows_the_code_the_hook_is_given():
    source = inspect.getsource(convert_frame._compile)
    modified = source.index('"MODIFIED BYTECODE"')
    assert source.index("hook(code, out_code)") > modified
    assert "out_code" in source[modified:modified + 200]


# --- 5.1 TORCH_TRACE and tlparse ----------------------------------------------------------------------

TRACED_PROGRAM = ("import torch\n"
                  "def f(x):\n    y = torch.sin(x) + 1\n    print('break')\n    return y * 2\n"
                  "torch.compile(f, backend='eager')(torch.randn(4))\n")


@pytest.fixture(scope="module")
def torch_trace_log(tmp_path_factory) -> Path:
    """The structured log of the chapter's traced program, run with TORCH_TRACE set."""
    log, = torch_trace_logs(TRACED_PROGRAM, tmp_path_factory.mktemp("torch_trace"))
    return log


@backs("notebooks/05_dynamo.ipynb", "torch 在导入时读它")
def test_torch_trace_is_read_once_when_torch_is_imported():
    assert "_logging._init_logs()" in (TORCH_ROOT / "__init__.py").read_text()
    init_logs = inspect.getsource(torch._logging._internal._init_logs)
    assert "os.environ.get(TRACE_ENV_VAR" in init_logs and "if LOG_TRACE_HANDLER is None:" in init_logs
    assert torch._logging._internal.TRACE_ENV_VAR == "TORCH_TRACE"


@backs("notebooks/05_dynamo.ipynb", "`dynamo_start` 出现两次")
def test_the_trace_has_one_start_graph_guards_and_metrics_event_per_frame(torch_trace_log):
    events = {}
    for line in torch_trace_log.read_text().splitlines():
        if line.startswith("V") and "{" in line:
            kind = next(iter(json.loads(line[line.index("{"):])))
            events[kind] = events.get(kind, 0) + 1
    assert [events.get(kind) for kind in ("dynamo_start", "dynamo_output_graph", "dynamo_cpp_guards_str",
                                          "compilation_metrics")] == [2, 2, 2, 2]


@backs("notebooks/05_dynamo.ipynb", "目录名是 `-_帧号_编译号_尝试号`")
def test_tlparse_writes_one_directory_per_compile_attempt(torch_trace_log, tmp_path):
    directory = tlparse_report(torch_trace_log, tmp_path / "report")
    pages = {compile_id: [artifact["url"] for artifact in entry["artifacts"]] for compile_id, entry in directory.items()}
    assert (tmp_path / "report" / "index.html").is_file()
    assert [url.split("/")[0] for url in pages["[0/0]"]] == ["-_0_0_0"]
    assert "dynamo_graph_break_reason" in pages["[0/0]"][0]
    assert any("dynamo_output_graph" in url and url.startswith("-_0_0_1/") for url in pages["[0/0_1]"])
    assert any("ORIGINAL_BYTECODE" in url for url in pages["[1/0]"]) and any("MODIFIED_BYTECODE" in url for url in pages["[1/0]"])


@backs("notebooks/05_dynamo.ipynb", "把 `aten._softmax`、`aten.silu` 这样的算子再拆成更基本的算子")
def test_inductor_hands_aot_autograd_a_table_that_splits_softmax_and_silu():
    from torch._inductor.decomposition import select_decomp_table

    table = select_decomp_table()
    assert torch.ops.aten._softmax.default in table and torch.ops.aten.silu.default in table
