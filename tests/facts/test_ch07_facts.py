"""Facts about torch that chapter 07 (the dispatcher) relies on, one test each."""
import gc
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._C import DispatchKey, DispatchKeySet
from torch.library import Library, custom_op, fallthrough_kernel

from facts import backs

TORCH_ROOT = Path(torch.__file__).parent
INCLUDE = TORCH_ROOT / "include"
BACKEND_BITS = (1 << 16) - 1


def keys_of(key_name: str) -> DispatchKeySet:
    return DispatchKeySet(getattr(DispatchKey, key_name))


def dump_lines(op_name: str) -> dict[str, str]:
    """``_dispatch_dump``: key (alias keys with their ``[alias]`` mark) -> the rest of its line."""
    return dict(line.split(": ", 1) for line in torch._C._dispatch_dump(op_name).splitlines() if ": " in line)


def table_rows(op_name: str) -> dict[str, str]:
    """``_dispatch_dump_table``: runtime key -> its entry."""
    return dict(line.split(": ", 1) for line in torch._C._dispatch_dump_table(op_name).splitlines() if ": " in line)


def tls_sets(mode) -> tuple[DispatchKeySet, DispatchKeySet]:
    with mode():
        return torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set()


def peel(keyset: DispatchKeySet) -> list[str]:
    """Runtime keys, highest first, taken off with the set's own API."""
    names = []
    while (key := keyset.highestPriorityTypeId()) != DispatchKey.Undefined:
        names.append(key.name)
        keyset = keyset.remove(key)
    return names


@pytest.fixture
def fresh_library(request):
    """A DEF library in a namespace of its own, destroyed after the test."""
    lib = Library(f"ch07facts_{request.node.name[5:40]}", "DEF")
    yield lib
    lib._destroy()


# --- 1.1 one operator, one table -------------------------------------------------------------

@backs("notebooks/07_dispatcher.ipynb", "编译时生成的 `RegisterCPU_*.cpp`")
def test_cpu_kernels_come_from_generated_register_cpu_files():
    assert re.search(r"/build/aten/src/ATen/RegisterCPU_\d+\.cpp:\d+", dump_lines("aten::add.Tensor")["CPU"])


@backs("notebooks/07_dispatcher.ipynb", "那是 PyTorch 官方构建机上检出源码的目录")
def test_cxx_kernel_paths_start_with_the_build_machine_checkout():
    assert dump_lines("aten::add.Tensor")["CPU"].startswith("registered at /__w/pytorch/pytorch/build/")


@backs("notebooks/07_dispatcher.ipynb", "是**别名键（alias key）**")
def test_add_is_registered_at_alias_keys_that_expand_to_per_backend_autograd():
    assert {"Autograd[alias]", "CompositeExplicitAutogradNonFunctional[alias]"} <= set(dump_lines("aten::add.Tensor"))
    rows = table_rows("aten::add.Tensor")
    assert rows["AutogradCPU"].endswith("[autograd kernel]") and rows["AutogradPrivateUse1"].endswith("[autograd kernel]")


@backs("notebooks/07_dispatcher.ipynb", "显示为 `(none) [ boxed ]`")
def test_python_kernels_are_boxed_only_and_cxx_kernels_both(fresh_library):
    fresh_library.define("twice(Tensor x) -> Tensor")
    fresh_library.impl("twice", lambda t: t * 2, "CPU")
    assert dump_lines(f"{fresh_library.ns}::twice")["CPU"].endswith(":: (none) [ boxed ]")
    assert dump_lines("aten::add.Tensor")["CPU"].endswith("[ boxed unboxed ]")


@backs("notebooks/07_dispatcher.ipynb", "而且都标着 `fallthrough`")
def test_add_passes_autocast_adinplaceorview_and_backendselect_through():
    rows = table_rows("aten::add.Tensor")
    for key in ("AutocastCPU", "ADInplaceOrView", "BackendSelect"):
        assert rows[key].startswith("fallthrough registered at") and rows[key].endswith("[backend fallback]"), key


@backs("notebooks/07_dispatcher.ipynb", "在 `ADInplaceOrView` 有自己的 `kernel`")
@backs("notebooks/07_dispatcher.ipynb", "autocast 只对它关心的算子（`mm`）停留，对 `add` 是透传")
def test_add_inplace_stops_at_adinplaceorview_and_mm_at_autocast_cpu():
    assert table_rows("aten::add_.Tensor")["ADInplaceOrView"].endswith("[kernel]")
    assert table_rows("aten::mm")["AutocastCPU"].endswith("[kernel]")
    assert table_rows("aten::add.Tensor")["AutocastCPU"].startswith("fallthrough")


# --- 1.2 the path of a call -------------------------------------------------------------------

@backs("notebooks/07_dispatcher.ipynb", "每到一个 (算子, 键) 都会问 Python")
def test_the_python_dispatcher_asks_each_op_overload_for_its_kernel():
    from torch._dispatch.python import enable_python_dispatcher
    assert callable(torch._ops.OpOverload._get_dispatch)
    with enable_python_dispatcher():
        assert torch._C._dispatch_tls_is_dispatch_key_included(DispatchKey.PythonDispatcher)


@backs("notebooks/07_dispatcher.ipynb", "`ADInplaceOrView` 在两个张量的键集合里都有，但对 `add.Tensor` 是透传")
def test_cpu_and_privateuse1_tensors_carry_adinplaceorview():
    import toychip  # noqa: F401  (a PrivateUse1 device)
    for device in ("cpu", "toychip"):
        assert torch._C._dispatch_keys(torch.ones(2, device=device)).has(DispatchKey.ADInplaceOrView), device
    assert table_rows("aten::add.Tensor")["ADInplaceOrView"].startswith("fallthrough")


@backs("notebooks/07_dispatcher.ipynb", "`F.linear` 就是这样")
def test_linear_is_composite_implicit():
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::linear", "CompositeImplicitAutograd")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::linear", "CPU")
    assert table_rows("aten::linear")["AutogradCPU"].endswith("[math kernel]")   # decomposed at the autograd key


@backs("notebooks/07_dispatcher.ipynb", "调度器的实现在 ATen：`ATen/core/dispatch/Dispatcher.h`")
@backs("notebooks/07_dispatcher.ipynb", "调度器在 `ATen/core/dispatch/Dispatcher.h`，键在 `c10/core/DispatchKey.h`")
def test_the_dispatcher_lives_in_aten_and_its_keys_in_c10():
    dispatcher = (INCLUDE / "ATen/core/dispatch/Dispatcher.h").read_text()
    assert "namespace c10" in dispatcher and "class TORCH_API Dispatcher" in dispatcher
    assert (INCLUDE / "c10/core/DispatchKey.h").is_file() and (INCLUDE / "c10/core/DispatchKeySet.h").is_file()
    assert not list(INCLUDE.glob("c10/**/Dispatcher.h"))


@backs("notebooks/07_dispatcher.ipynb", "`torch/_library/custom_ops.py`、`torch/_ops.py`（Python 调度器）")
def test_the_further_reading_files_are_in_torch():
    assert (TORCH_ROOT / "_library/custom_ops.py").is_file()
    assert "python_dispatcher" in (TORCH_ROOT / "_ops.py").read_text()
    assert (INCLUDE / "ATen/core/dispatch/OperatorEntry.h").is_file()


# --- 2 backends -------------------------------------------------------------------------------

@backs("notebooks/07_dispatcher.ipynb", "设备决定了张量带哪个后端键")
def test_the_device_decides_the_backend_key():
    assert torch._C._dispatch_key_for_device("cpu") == "CPU"
    assert torch._C._dispatch_key_for_device("meta") == "Meta"
    assert str(torch._C._dispatch_keys(torch.empty(1, device="meta"))).startswith("DispatchKeySet(Meta,")


@backs("notebooks/07_dispatcher.ipynb", "设备名就是改名后的 `PrivateUse1`")
def test_the_renamed_privateuse1_device_maps_to_its_key():
    import toychip  # noqa: F401  (renames PrivateUse1 to "toychip")
    assert torch._C._dispatch_key_for_device("toychip") == "PrivateUse1"


@backs("notebooks/07_dispatcher.ipynb", "先分配输出，再调用 **`cumsum.out`**")
def test_cumsum_on_a_backend_without_it_is_the_structured_composite_wrapper():
    row = table_rows("aten::cumsum")["PrivateUse1"]
    assert "RegisterCompositeExplicitAutogradNonFunctional" in row and row.endswith("[default backend kernel]")


PRIVATEUSE1_NAMESPACES = """
import torch
registered = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
print(sorted({name.split("::")[0] for name in registered}))
"""


@backs("notebooks/07_dispatcher.ipynb", "`torch/csrc/distributed/c10d/Ops.cpp`，`import toychip` 之前就在")
def test_torch_itself_registers_c10d_collectives_for_privateuse1():
    registered = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    collectives = [name for name in registered if name.startswith("c10d::")]
    assert collectives
    for name in collectives:   # C++ registrations compiled into torch, not the chip's Python ones
        assert "/torch/csrc/distributed/c10d/Ops.cpp:" in dump_lines(name)["PrivateUse1"], name
    fresh = subprocess.run([sys.executable, "-c", PRIVATEUSE1_NAMESPACES], capture_output=True, text=True, check=True)
    assert fresh.stdout.strip() == "['c10d']"   # a fresh `import torch`, no toychip: only c10d


@backs("notebooks/07_dispatcher.ipynb", "取默认值 `'none'` 时调度器不传它")
def test_a_kwarg_equal_to_its_default_is_not_passed_to_a_python_kernel(fresh_library):
    schema = str(torch.ops.aten.gelu.default._schema).removeprefix("aten::")
    assert schema == 'gelu(Tensor self, *, str approximate="none") -> Tensor'
    seen = []
    fresh_library.define(schema)
    fresh_library.impl("gelu", lambda t, **kwargs: seen.append(kwargs) or t.clone(), "CPU")
    gelu = getattr(torch.ops, fresh_library.ns).gelu
    gelu(torch.ones(1), approximate="none")
    gelu(torch.ones(1), approximate="tanh")
    assert seen == [{}, {"approximate": "tanh"}]


# --- 3.1 the keys of a tensor ------------------------------------------------------------------

@backs("notebooks/07_dispatcher.ipynb", "键集合**完全相同**")
@backs("notebooks/07_dispatcher.ipynb", "`requires_grad` 不改变键")
def test_requires_grad_does_not_change_the_keys():
    plain, needs_grad = torch.ones(2), torch.ones(2, requires_grad=True)
    assert torch._C._dispatch_keys(plain) == torch._C._dispatch_keys(needs_grad)
    assert torch._C._dispatch_keys(plain).has(DispatchKey.AutogradCPU)


@backs("notebooks/07_dispatcher.ipynb", "**推理张量**没有 `AutogradCPU` 和 `ADInplaceOrView`")
@backs("notebooks/07_dispatcher.ipynb", "推理张量没有 Autograd 键")
def test_inference_tensors_have_no_autograd_or_adinplaceorview_key():
    with torch.inference_mode():
        keys = torch._C._dispatch_keys(torch.ones(2))
    assert not keys.has(DispatchKey.AutogradCPU) and not keys.has(DispatchKey.ADInplaceOrView)
    assert keys.has(DispatchKey.CPU)


@backs("notebooks/07_dispatcher.ipynb", "最低的 16 位是**后端位**")
def test_a_key_set_is_64_bits_backends_below_bit_16():
    assert torch._C._dispatch_keyset_full().raw_repr().bit_length() <= 64
    assert keys_of("Dense").raw_repr() == 1 << 16
    for backend in ("CPU", "CUDA", "PrivateUse1", "Meta"):
        assert keys_of(backend).raw_repr() & BACKEND_BITS, backend
        assert keys_of(backend).raw_repr() & ~BACKEND_BITS == 1 << 16, backend


@backs("notebooks/07_dispatcher.ipynb", "占两位：Autograd 功能位 × CPU 后端位")
def test_a_per_backend_key_is_a_functionality_bit_and_a_backend_bit():
    cpu_bit = keys_of("CPU").raw_repr() & BACKEND_BITS
    assert keys_of("AutogradCPU").raw_repr() == keys_of("AutogradFunctionality").raw_repr() | cpu_bit
    assert keys_of("CPU").raw_repr() == keys_of("Dense").raw_repr() | cpu_bit


@backs("notebooks/07_dispatcher.ipynb", "打印成 `DispatchKeySet()`——但它不是空的")
def test_a_functionality_bit_without_a_backend_prints_as_empty():
    for name in ("Dense", "AutogradFunctionality"):
        assert str(keys_of(name)) == "DispatchKeySet()" and keys_of(name).raw_repr() != 0, name


@backs("notebooks/07_dispatcher.ipynb", "`DispatchKeySet(DispatchKey.Autograd)` 真的是空集")
@backs("notebooks/07_dispatcher.ipynb", "对任何集合 `has(DispatchKey.Autograd)` 都是 `True`")
def test_an_alias_key_has_no_bits_so_every_set_has_it():
    assert keys_of("Autograd").raw_repr() == 0 and keys_of("CompositeImplicitAutograd").raw_repr() == 0
    assert keys_of("Undefined").has(DispatchKey.Autograd)


# --- 3.2 priority ------------------------------------------------------------------------------

@backs("notebooks/07_dispatcher.ipynb", "打印出来的键集合是**从低到高**排列的")
def test_a_printed_key_set_lists_its_keys_lowest_first():
    keys = torch._C._dispatch_keys(torch.ones(2))
    printed = str(keys)[len("DispatchKeySet("):-1].split(", ")
    assert printed == list(reversed(peel(keys)))


RANKED = ("CPU", "PrivateUse1", "Meta", "BackendSelect", "Python", "ADInplaceOrView", "AutogradCPU",
          "AutogradPrivateUse1", "AutocastCPU", "PreDispatch", "PythonDispatcher")


@backs("notebooks/07_dispatcher.ipynb", "把只含一个键的集合的 `raw_repr()` 当成数来比")
@backs("lib/toychip/dispatch_trace.py", "its own one-key set read as a number")
def test_a_one_key_sets_word_ranks_keys_as_highest_priority_does():
    for a in RANKED:
        for b in RANKED:
            higher = max(a, b, key=lambda name: keys_of(name).raw_repr())
            winner = (keys_of(a) | keys_of(b)).highestPriorityTypeId()
            same_functionality = (keys_of(a).raw_repr() & ~BACKEND_BITS) == (keys_of(b).raw_repr() & ~BACKEND_BITS)
            same_backend = (keys_of(a).raw_repr() & BACKEND_BITS) == (keys_of(b).raw_repr() & BACKEND_BITS)
            if same_functionality or same_backend:   # otherwise the winner pairs one's functionality with the other's backend
                assert winner.name == higher, (a, b)
            else:
                assert keys_of(winner.name).raw_repr() & ~BACKEND_BITS == keys_of(higher).raw_repr() & ~BACKEND_BITS


@backs("notebooks/07_dispatcher.ipynb", "PrivateUse1 比 CPU 高")
def test_privateuse1_outranks_cpu_in_a_mixed_set():
    assert (keys_of("CPU") | keys_of("PrivateUse1")).highestPriorityTypeId() == DispatchKey.PrivateUse1
    mixed = (keys_of("AutogradCPU") | keys_of("AutogradPrivateUse1") | keys_of("AutocastCPU") | keys_of("AutocastPrivateUse1"))
    effective = mixed - torch._C._dispatch_tls_local_exclude_set()
    assert effective.highestPriorityTypeId() == DispatchKey.AutogradPrivateUse1


# --- 3.3 thread-local include and exclude ----------------------------------------------------

AUTOCAST_KEYS = [k for name, k in DispatchKey.__members__.items() if name.startswith("Autocast")]


@backs("notebooks/07_dispatcher.ipynb", "Autocast 键默认在线程局部的 exclude 集合里")
@backs("notebooks/07_dispatcher.ipynb", "`Autocast*` 键都在 `exclude` 里")
def test_every_autocast_key_is_excluded_by_default():
    _, exclude = tls_sets(torch.enable_grad)
    assert AUTOCAST_KEYS and all(exclude.has(key) for key in AUTOCAST_KEYS)


@backs("notebooks/07_dispatcher.ipynb", "默认：`include` 里有 `ADInplaceOrView` 和 `BackendSelect`")
def test_the_default_include_set_is_adinplaceorview_and_backendselect():
    include, _ = tls_sets(torch.enable_grad)
    assert include == keys_of("ADInplaceOrView") | keys_of("BackendSelect")


@backs("notebooks/07_dispatcher.ipynb", "`no_grad`：两个集合**都没变**")
@backs("notebooks/07_dispatcher.ipynb", "Autograd 内核看到标志后不记录 `grad_fn`")
@backs("notebooks/07_dispatcher.ipynb", "`no_grad` 不改变调度路径")
def test_no_grad_changes_neither_set_only_the_grad_mode():
    assert tls_sets(torch.no_grad) == tls_sets(torch.enable_grad)
    with torch.no_grad():
        assert not torch.is_grad_enabled()
        assert torch.ones(2, requires_grad=True).mul(2).grad_fn is None


@backs("notebooks/07_dispatcher.ipynb", "排除所有 `Autograd<后端>` 键")
def test_inference_mode_excludes_the_autograd_functionality_bit():
    default_include, default_exclude = tls_sets(torch.enable_grad)
    include, exclude = tls_sets(torch.inference_mode)
    assert default_include.has(DispatchKey.ADInplaceOrView) and not include.has(DispatchKey.ADInplaceOrView)
    added = exclude.raw_repr() & ~default_exclude.raw_repr()
    expected = keys_of("AutogradFunctionality") | keys_of("AutogradOther") | keys_of("AutogradNestedTensor")
    assert added == expected.raw_repr()
    cpu_keys = torch._C._dispatch_keys(torch.ones(2))
    assert not (cpu_keys - exclude).has(DispatchKey.AutogradCPU)
    assert (cpu_keys - keys_of("AutogradOther")).has(DispatchKey.AutogradCPU)   # AutogradOther alone leaves it


def effective_keys(tensors) -> list[str]:
    """The keys a call with these tensors dispatches on, highest first (section 3.3's formula)."""
    keys = DispatchKeySet(DispatchKey.Undefined)
    for t in tensors:
        keys = keys | torch._C._dispatch_keys(t)
    keys = (keys | torch._C._dispatch_tls_local_include_set()) - torch._C._dispatch_tls_local_exclude_set()
    return peel(keys)


@backs("notebooks/07_dispatcher.ipynb", "（在推理模式之外创建的）张量自带的 `ADInplaceOrView` 键还在")
@backs("notebooks/07_dispatcher.ipynb", "对推理张量则只剩 `['CPU']`")
def test_inference_mode_keeps_an_ordinary_tensors_adinplaceorview_key():
    ordinary = torch.ones(2)
    assert effective_keys([ordinary]) == ["AutogradCPU", "ADInplaceOrView", "BackendSelect", "CPU"]
    with torch.inference_mode():
        inference = torch.ones(2)
        assert effective_keys([ordinary]) == ["ADInplaceOrView", "BackendSelect", "CPU"]
        assert effective_keys([inference]) == ["BackendSelect", "CPU"]


@backs("notebooks/07_dispatcher.ipynb", "给 `MkldnnCPU` 这类没有自己 Autograd 键的后端用")
def test_autograd_other_serves_backends_without_their_own_autograd_key():
    keys = torch._C._dispatch_keys(torch.ones(2, 2).to_mkldnn())
    assert keys.has(DispatchKey.AutogradOther) and not keys.has(DispatchKey.AutogradCPU)


@backs("notebooks/07_dispatcher.ipynb", "`AutocastCPU` 从 exclude 中移除")
def test_autocast_cpu_takes_its_key_out_of_the_exclude_set():
    _, default_exclude = tls_sets(torch.enable_grad)
    _, exclude = tls_sets(lambda: torch.autocast("cpu"))
    assert default_exclude.raw_repr() & ~exclude.raw_repr() == keys_of("AutocastCPU").raw_repr()


@backs("notebooks/07_dispatcher.ipynb", "组合不出可打印的运行时键")
def test_the_printout_hides_the_autograd_bit_of_the_inference_exclude_set():
    _, exclude = tls_sets(torch.inference_mode)
    assert exclude.has(DispatchKey.AutogradFunctionality)
    assert not re.search(r"\bAutograd(Functionality|CPU|PrivateUse1)?\b", str(exclude))
    assert "AutogradOther" in str(exclude)


@backs("notebooks/07_dispatcher.ipynb", "在 Python 的 `torch._C.DispatchKey` 里没有成员")
def test_three_autocast_keys_have_no_python_name():
    _, exclude = tls_sets(torch.enable_grad)
    for name in ("AutocastMTIA", "AutocastMAIA", "AutocastXLA"):
        assert name in str(exclude) and name not in DispatchKey.__members__, name


@backs("notebooks/07_dispatcher.ipynb", "`has(k)` 要求 k 的**所有位**都在")
def test_has_asks_for_every_bit_of_the_key():
    _, exclude = tls_sets(torch.inference_mode)
    assert exclude.has(DispatchKey.AutogradFunctionality) and not exclude.has(DispatchKey.AutogradCPU)


@backs("notebooks/07_dispatcher.ipynb", "`a - b` 只去掉 b 的**功能位**")
@backs("notebooks/07_dispatcher.ipynb", "`-` 和 `remove` 只去掉功能位")
def test_minus_removes_only_functionality_bits():
    cpu_keys = torch._C._dispatch_keys(torch.ones(2))
    without_cpu = cpu_keys - keys_of("CPU")
    assert without_cpu.raw_repr() == cpu_keys.raw_repr() & ~keys_of("Dense").raw_repr()
    assert without_cpu.has(DispatchKey.AutogradCPU) and not without_cpu.has(DispatchKey.CPU)


@backs("notebooks/07_dispatcher.ipynb", "`AutogradPrivateUse1` 也跟着没了")
def test_remove_takes_a_functionality_away_from_every_backend():
    both = keys_of("AutogradCPU") | keys_of("AutogradPrivateUse1") | keys_of("CPU") | keys_of("PrivateUse1")
    removed = both.remove(DispatchKey.AutogradCPU)
    assert not removed.has(DispatchKey.AutogradPrivateUse1) and removed.has(DispatchKey.CPU)


@backs("notebooks/07_dispatcher.ipynb", "推理张量也不做视图追踪和版本计数")
def test_inference_mode_saves_view_tracking_and_version_counting():
    assert "removes additional overhead by disabling view\n    tracking and version counter bumps" in torch.inference_mode.__doc__


@backs("notebooks/07_dispatcher.ipynb", "和 CUDA 一样，它在 `AutocastPrivateUse1` 上登记了一个**透传回退**")
def test_cuda_autocast_is_a_fallthrough_plus_a_long_list_of_kernels():
    assert table_rows("aten::add.Tensor")["AutocastCUDA"].startswith("fallthrough")
    cuda_ops = torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCUDA")
    assert {"aten::mm", "aten::addmm", "aten::bmm", "aten::softmax.int"} <= set(cuda_ops) and len(cuda_ops) > 4


@backs("notebooks/07_dispatcher.ipynb", "最后是 CPU 的 `mm` 内核里调用的 `resolve_conj`")
def test_autocast_mm_casts_twice_then_runs_mm_whose_cpu_kernel_calls_resolve_conj():
    from toychip import trace_dispatch

    x = torch.ones(2, 2)
    with torch.autocast("cpu"):
        steps = [(step.op, step.key) for step in trace_dispatch(torch.mm, x, x).steps]
    mm_steps = [i for i, (op, _) in enumerate(steps) if op == "aten.mm.default"]
    assert [steps[i][1] for i in mm_steps] == ["AutocastCPU", "AutogradCPU", "CPU"] and mm_steps[0] == 0
    assert [step for step in steps if step[0] == "aten.to.dtype"] == [("aten.to.dtype", "AutogradCPU")] * 2
    assert {op for op, _ in steps[mm_steps[-1] + 1:]} == {"aten.resolve_conj.default"}
    with torch.inference_mode():   # only the CPU kernel runs, so it is the caller
        steps = [(step.op, step.key) for step in trace_dispatch(torch.mm, torch.ones(2, 2), torch.ones(2, 2)).steps]
    assert steps[0] == ("aten.mm.default", "CPU") and {op for op, _ in steps[1:]} == {"aten.resolve_conj.default"}


# --- 4 registration ------------------------------------------------------------------------------

@backs("notebooks/07_dispatcher.ipynb", "`TORCH_LIBRARY_IMPL(ns, Key, m)`")
def test_library_kinds_are_the_three_cxx_macros():
    header = (INCLUDE / "torch/library.h").read_text()
    for macro, kind in (("TORCH_LIBRARY", "DEF"), ("_TORCH_LIBRARY_FRAGMENT", "FRAGMENT"), ("_TORCH_LIBRARY_IMPL", "IMPL")):
        body = header[header.index(f"#define {macro}("):]
        assert f"torch::Library::{kind}," in body[:body.index("#define", 1)], macro
    assert "kind not in (\"IMPL\", \"DEF\", \"FRAGMENT\")" in inspect.getsource(Library.__init__)


@backs("notebooks/07_dispatcher.ipynb", '`"_"` 命名空间用于回退')
def test_fallbacks_are_registered_in_the_underscore_namespace():
    lib = Library("ch07facts_not_underscore", "IMPL")
    try:
        with pytest.raises(RuntimeError, match='global namespace "_"'):
            lib.fallback(fallthrough_kernel, "PrivateUse3")
    finally:
        lib._destroy()


@backs("notebooks/07_dispatcher.ipynb", "**陷阱一：同一个算子只能定义一次。**")
def test_an_op_and_a_namespace_are_defined_once(fresh_library):
    fresh_library.define("twice(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match="same name and overload name"):
        fresh_library.define("twice(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match="Only a single TORCH_LIBRARY"):
        Library(fresh_library.ns, "DEF")


@backs("notebooks/07_dispatcher.ipynb", "`Library` 被垃圾回收时，它的所有注册都会被撤销")
def test_a_collected_library_takes_its_registrations_with_it():
    def define():
        lib = Library("ch07facts_collected", "DEF")
        lib.define("inc(Tensor x) -> Tensor")
        lib.impl("inc", lambda t: t + 1, "CPU")
        return torch.ops.ch07facts_collected.inc(torch.zeros(1))

    assert define().item() == 1
    gc.collect()
    assert not hasattr(torch.ops.ch07facts_collected, "inc")


OVERRIDE_TWICE = """
import warnings, torch
from torch.library import Library
counts = []
for _ in range(2):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = Library("aten", "IMPL")
        lib.impl("relu", lambda a: a, "CPU")
    counts.append(sum("Overriding a previously registered kernel" in str(w.message) for w in caught))
    lib._destroy()
print(counts)
"""


@backs("notebooks/07_dispatcher.ipynb", "覆盖一个已有内核只会警告，而且每个进程只警告一次")
def test_overriding_a_kernel_warns_once_per_process():
    result = subprocess.run([sys.executable, "-c", OVERRIDE_TWICE], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[1, 0]"


@backs("notebooks/07_dispatcher.ipynb", "`AutogradCPU` 上用的是 Autograd 的**后端回退**")
@backs("notebooks/07_dispatcher.ipynb", "登记它的键会被调度器直接跳过")
def test_an_op_without_autograd_uses_the_backend_fallback_until_a_fallthrough(fresh_library):
    fresh_library.define("twice(Tensor x) -> Tensor")
    fresh_library.impl("twice", lambda t: t * 2, "CPU")
    op = f"{fresh_library.ns}::twice"
    assert table_rows(op)["AutogradCPU"].endswith("[backend fallback]")
    fresh_library.impl("twice", fallthrough_kernel, "Autograd")
    assert table_rows(op)["AutogradCPU"].startswith("fallthrough")


@backs("notebooks/07_dispatcher.ipynb", "内核的第一个参数就是本次调用的键集合 `keyset`")
def test_a_with_keyset_kernel_gets_the_calls_key_set_first(fresh_library):
    seen = []

    def kernel(keyset, t):
        seen.append(keyset)
        return t.clone()

    fresh_library.define("probe(Tensor x) -> Tensor")
    fresh_library.impl("probe", kernel, "CPU", with_keyset=True)
    getattr(torch.ops, fresh_library.ns).probe(torch.ones(1))
    assert isinstance(seen[0], DispatchKeySet) and seen[0].has(DispatchKey.CPU)


@backs("notebooks/07_dispatcher.ipynb", "交给同一个函数 `fallback(op, *args, **kwargs)`")
def test_a_python_fallback_receives_the_op_then_its_arguments():
    assert "def fallback_kernel(op, *args, **kwargs):" in Library.fallback.__doc__


@backs("notebooks/07_dispatcher.ipynb", "`op.redispatch(keyset & torch._C._dispatch_keyset_full_after(my_key), *args)`")
def test_full_after_a_key_holds_the_keys_below_it():
    after = torch._C._dispatch_keyset_full_after(DispatchKey.AutogradCPU)
    assert not after.has(DispatchKey.AutogradCPU) and not after.has(DispatchKey.AutocastCPU)
    assert after.has(DispatchKey.ADInplaceOrView) and after.has(DispatchKey.CPU)


# --- 4.5 a tiny dispatcher ---------------------------------------------------------------------

def logged_path(lib: Library, kernels: dict, *tensors) -> list[str]:
    """Define ``probe`` in ``lib`` with a logging kernel at each key of ``kernels`` (it then
    redispatches below its key, or returns); the keys one call of it logs."""
    lib.define("probe(Tensor x, Tensor? other=None) -> Tensor")
    probe, log = getattr(torch.ops, lib.ns).probe.default, []

    def kernel_at(name, kind):
        below = torch._C._dispatch_keyset_full_after(getattr(DispatchKey, name))

        def kernel(keyset, x, other=None):
            log.append(name)
            return x.clone() if kind == "return" else probe.redispatch(keyset & below, x, other)
        return kernel

    for name, kind in kernels.items():
        lib.impl("probe", kernel_at(name, kind), name, with_keyset=True)
    probe(*tensors)
    return log


@backs("notebooks/07_dispatcher.ipynb", "的回退是透传，Autograd 的回退做完自己的事就往下交")
def test_an_op_without_its_own_kernels_passes_these_keys_through_or_down(fresh_library):
    import toychip  # noqa: F401  (registers the PrivateUse1 autocast fallthrough)

    assert logged_path(fresh_library, {"CPU": "return"}, torch.ones(2)) == ["CPU"]
    rows = table_rows(f"{fresh_library.ns}::probe")
    for key in ("AutocastCPU", "AutocastPrivateUse1", "ADInplaceOrView", "BackendSelect"):
        assert rows[key].startswith("fallthrough") and rows[key].endswith("[backend fallback]"), key
    for key in ("AutogradCPU", "AutogradPrivateUse1", "AutogradMeta"):
        assert not rows[key].startswith("fallthrough") and rows[key].endswith("[backend fallback]"), key


@backs("notebooks/07_dispatcher.ipynb", "每个功能只走一个后端——集合里最高的那个")
def test_a_mixed_device_call_runs_one_autograd_kernel_the_highest_backends(fresh_library):
    import toychip  # noqa: F401  (a PrivateUse1 device)

    kernels = {"AutogradCPU": "redispatch", "AutogradPrivateUse1": "redispatch", "CPU": "return", "PrivateUse1": "return"}
    path = logged_path(fresh_library, kernels, torch.ones(2, device="toychip"), torch.tensor(2.0))
    assert path == ["AutogradPrivateUse1", "PrivateUse1"]


@backs("notebooks/07_dispatcher.ipynb", "线程局部状态已经算在里面：redispatch 不会回到张量那里重新算一遍")
def test_a_kernel_gets_the_key_set_with_the_thread_local_state_applied(fresh_library):
    seen = []

    def autocast_kernel(keyset, x):
        seen.append(keyset)
        return probe.redispatch(keyset & torch._C._dispatch_keyset_full_after(DispatchKey.AutocastCPU), x)

    fresh_library.define("probe(Tensor x) -> Tensor")
    probe = getattr(torch.ops, fresh_library.ns).probe.default
    fresh_library.impl("probe", autocast_kernel, "AutocastCPU", with_keyset=True)
    fresh_library.impl("probe", lambda t: t.clone(), "CPU")
    with torch.inference_mode(), torch.autocast("cpu"):
        probe(torch.ones(2))
    assert torch._C._dispatch_keys(torch.ones(2)).has(DispatchKey.AutogradCPU)
    assert seen[0].has(DispatchKey.AutocastCPU) and not seen[0].has(DispatchKey.AutogradCPU)


@backs("notebooks/07_dispatcher.ipynb", "在一个 `with` 块里把键加进 include / exclude 集合，离开时恢复")
def test_the_include_and_exclude_guards_add_a_key_for_the_block():
    before = tls_sets(torch.enable_grad)
    with torch._C._IncludeDispatchKeyGuard(DispatchKey.AutogradCPU):
        assert torch._C._dispatch_tls_local_include_set().has(DispatchKey.AutogradCPU)
    with torch._C._ExcludeDispatchKeyGuard(keys_of("ADInplaceOrView")):
        assert torch._C._dispatch_tls_local_exclude_set().has(DispatchKey.ADInplaceOrView)
    assert tls_sets(torch.enable_grad) == before


@backs("notebooks/07_dispatcher.ipynb", "include 进来的 `AutogradCPU` 让推理张量也走进了 Autograd 层")
@backs("notebooks/07_dispatcher.ipynb", "它同时在两个集合里，exclude 说了算")
def test_an_included_key_joins_the_call_unless_it_is_also_excluded():
    from toychip import trace_dispatch

    with torch.inference_mode():
        inference_x = torch.ones(2, 2)
    x = torch.ones(2, 2)
    assert trace_dispatch(torch.mm, inference_x, inference_x).path() == ["CPU"]
    with torch._C._IncludeDispatchKeyGuard(DispatchKey.AutogradCPU):
        assert trace_dispatch(torch.mm, inference_x, inference_x).path() == ["AutogradCPU", "CPU"]
    with torch._C._IncludeDispatchKeyGuard(DispatchKey.AutocastCPU):
        include, exclude = torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set()
        assert include.has(DispatchKey.AutocastCPU) and exclude.has(DispatchKey.AutocastCPU)
        assert trace_dispatch(torch.mm, x, x).path() == ["AutogradCPU", "CPU"]


@backs("notebooks/07_dispatcher.ipynb", "ADInplaceOrView、BackendSelect 是透传，CPU 上是真正计算的内核")
def test_mm_stops_at_autocast_autograd_and_cpu_and_passes_the_rest_through():
    rows = table_rows("aten::mm")
    assert rows["AutocastCPU"].endswith("[kernel]") and rows["CPU"].endswith("[kernel]")
    assert rows["AutogradCPU"].endswith("[autograd kernel]")
    assert rows["ADInplaceOrView"].startswith("fallthrough") and rows["BackendSelect"].startswith("fallthrough")


@backs("notebooks/07_dispatcher.ipynb", "它先把自己的键加进 exclude，再把输入转成低精度")
@backs("notebooks/07_dispatcher.ipynb", "然后用转好的张量从头调用一次 `mm`")
@backs("notebooks/07_dispatcher.ipynb", "转出来的是普通张量，带着 `AutogradCPU`")
def test_autocast_calls_mm_again_on_cast_tensors_with_its_key_excluded():
    from toychip import trace_dispatch

    assert "c10::impl::ExcludeDispatchKeyGuard no_autocast(" in (INCLUDE / "ATen/autocast_mode.h").read_text()
    with torch.inference_mode():
        inference_x = torch.ones(2, 2)
    cast = inference_x.to(torch.bfloat16)
    assert not cast.is_inference() and torch._C._dispatch_keys(cast).has(DispatchKey.AutogradCPU)
    with torch.autocast("cpu"):
        assert trace_dispatch(torch.mm, inference_x, inference_x).path("mm") == ["AutocastCPU", "AutogradCPU", "CPU"]



@backs("notebooks/07_dispatcher.ipynb", "`Tensor(a!) out` 的意思")
def test_out_and_inplace_schemas_mark_the_written_argument_and_return_it():
    out = torch.ops.aten.cumsum.out._schema
    written = out.arguments[-1]
    assert written.name == "out" and written.kwarg_only and written.alias_info.is_write
    assert out.returns[0].alias_info.before_set == written.alias_info.before_set == {"a"}
    assert torch.ops.aten.add_.Tensor._schema.arguments[0].alias_info.is_write


# --- 5 custom operators -----------------------------------------------------------------------

def scaled_tanh_op(name: str):
    @custom_op(f"ch07facts::{name}", mutates_args=())
    def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
        return torch.tanh(x) * scale
    return scaled_tanh


@backs("notebooks/07_dispatcher.ipynb", "定义的那一刻它就登记了三个内核")
def test_custom_op_registers_meta_autograd_and_composite_explicit_at_definition():
    scaled_tanh_op("registered")
    assert set(dump_lines("ch07facts::registered")) >= {"Meta", "Autograd[alias]", "CompositeExplicitAutograd[alias]"}
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("ch07facts::registered", "CPU")


@backs("notebooks/07_dispatcher.ipynb", "直接登记的内核优先于 `CompositeExplicitAutograd` 的默认实现")
def test_a_backend_kernel_beats_the_composite_explicit_default(fresh_library):
    fresh_library.define("twice(Tensor x) -> Tensor")
    fresh_library.impl("twice", lambda t: t * 2, "CompositeExplicitAutograd")
    fresh_library.impl("twice", lambda t: t * 3, "CPU")
    rows = table_rows(f"{fresh_library.ns}::twice")
    assert rows["CPU"].endswith("[kernel]") and rows["Meta"].endswith("[default backend kernel]")
    assert getattr(torch.ops, fresh_library.ns).twice(torch.ones(1)).item() == 3


@backs("notebooks/07_dispatcher.ipynb", "`There was no fake impl registered`")
def test_compiling_a_custom_op_without_a_fake_impl_names_the_missing_register_fake():
    op = scaled_tanh_op("no_fake")
    torch._dynamo.reset()
    with pytest.raises(Exception) as caught:
        torch.compile(lambda t: op(t, 2.0), fullgraph=True, backend="eager")(torch.ones(2))
    torch._dynamo.reset()
    headline, explanation = str(caught.value).splitlines()[:2]
    assert headline == "RuntimeError when making fake tensor call"
    assert "There was no fake impl registered" in explanation and "register_fake" in explanation


@backs("notebooks/07_dispatcher.ipynb", "没有它，错误要到反向时才出现")
def test_a_custom_op_without_register_autograd_fails_only_in_backward():
    op = scaled_tanh_op("no_backward")
    y = op(torch.ones(2, requires_grad=True), 2.0)
    assert y.grad_fn is not None
    with pytest.raises(RuntimeError, match="no autograd formula was registered"):
        y.sum().backward()


@backs("notebooks/07_dispatcher.ipynb", "`inputs` 是算子的全部参数（按模式的顺序")
@backs("notebooks/07_dispatcher.ipynb", "不是张量的输入（`scale`）返回 `None`")
def test_setup_context_sees_every_input_and_backward_returns_one_gradient_per_input():
    op = scaled_tanh_op("with_backward")
    seen = []

    def setup_context(ctx, inputs, output):
        seen.append(inputs)

    op.register_autograd(lambda ctx, grad: grad, setup_context=setup_context)   # one gradient for two inputs
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        op(x, 2.0).sum().backward()
    assert len(seen[0]) == 2 and seen[0][0] is x and seen[0][1] == 2.0
    op.register_autograd(lambda ctx, grad: (grad, None), setup_context=setup_context)
    op(x, 2.0).sum().backward()
    assert torch.equal(x.grad, torch.ones(2))


@backs("notebooks/07_dispatcher.ipynb", "`opcheck` 的四项")
def test_opcheck_runs_four_tests_by_default():
    default = inspect.signature(torch.library.opcheck).parameters["test_utils"].default
    assert tuple(default) == ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


@backs("notebooks/07_dispatcher.ipynb", "只在有输入需要梯度时才检查")
@backs("notebooks/07_dispatcher.ipynb", "目前只支持 CPU/CUDA/XPU 设备")
def test_the_autograd_registration_check_needs_grad_and_a_cpu_cuda_or_xpu_input():
    from torch.testing._internal.optests.autograd_registration import autograd_registration_check
    from torch.testing._internal.optests.generate_tests import safe_autograd_registration_check
    sin = torch.ops.aten.sin.default
    assert safe_autograd_registration_check(sin, (torch.ones(2),), {}) is None   # skipped, counts as passed
    with pytest.raises(RuntimeError, match="no inputs have requires_grad=True"):
        autograd_registration_check(sin, (torch.ones(2),), {})
    with pytest.raises(NotImplementedError, match="CPU/CUDA/XPU"):
        autograd_registration_check(sin, (torch.ones(2, device="meta", requires_grad=True),), {})


@backs("notebooks/07_dispatcher.ipynb", "`test_aot_dispatch_dynamic` 会跑反向")
def test_opcheck_finds_a_missing_backward_in_aot_dispatch_dynamic():
    op = scaled_tanh_op("opcheck_backward")
    op.register_fake(lambda x, scale: torch.empty_like(x))
    result = torch.library.opcheck(op, (torch.randn(3, requires_grad=True), 2.0), raise_exception=False,
                                   test_utils=("test_autograd_registration", "test_aot_dispatch_dynamic"))
    torch._dynamo.reset()
    assert result["test_autograd_registration"] == "SUCCESS"
    assert "no autograd formula was registered" in str(result["test_aot_dispatch_dynamic"])


@backs("notebooks/07_dispatcher.ipynb", "步长是否与真实现一致")
def test_the_fake_tensor_check_compares_strides():
    from torch._subclasses import CrossRefFakeMode
    assert inspect.signature(CrossRefFakeMode.__init__).parameters["check_strides"].default is True


@backs("notebooks/07_dispatcher.ipynb", "meta 张量和假张量用的是同一个假实现")
def test_meta_tensors_and_fake_tensors_both_run_the_registered_fake_impl():
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = scaled_tanh_op("same_fake")
    op.register_fake(lambda x, scale: x.new_empty(5))   # a shape only the fake impl gives
    assert op(torch.empty(2, device="meta"), 2.0).shape == (5,)
    with FakeTensorMode() as mode:
        assert op(mode.from_tensor(torch.ones(2)), 2.0).shape == (5,)


@backs("notebooks/07_dispatcher.ipynb", "还没有假实现时报错（只改写输入的算子除外：torch 能替它们生成）")
def test_a_custom_op_without_a_fake_impl_fails_on_meta_unless_it_only_mutates():
    returns_tensor = scaled_tanh_op("meta_error")
    with pytest.raises(RuntimeError, match="There was no fake impl registered"):
        returns_tensor(torch.empty(2, device="meta"), 2.0)

    @custom_op("ch07facts::fill_ones", mutates_args=("x",))
    def fill_ones(x: torch.Tensor) -> None:
        x.fill_(1)
    assert fill_ones(torch.empty(2, device="meta")) is None


@backs("notebooks/07_dispatcher.ipynb", "签名变成 `setup_context(ctx, inputs, keyword_only_inputs, output)`")
def test_setup_context_of_an_op_with_keyword_only_arguments_gets_them_separately():
    assert "setup_context(ctx, inputs, keyword_only_inputs, output)" in torch.library.register_autograd.__doc__


@backs("notebooks/07_dispatcher.ipynb", "有输入需要梯度时也比较梯度")
def test_aot_dispatch_checks_compare_outputs_and_gradients_with_eager():
    from torch.testing._internal.optests import generate_tests
    assert "checks that the outputs (and gradients, if they are computable)" in inspect.getsource(generate_tests)
