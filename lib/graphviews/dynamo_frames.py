"""What Dynamo leaves behind, as views (chapter 05): the frames it rewrote and the cache
entries a code object carries.

* :func:`frames_view` draws every frame Dynamo compiled in one run — the original function
  and the resume functions after each graph break — as a frame holding what its new
  bytecode calls: compiled graphs (``__compiled_fn_*``), then the instruction Python runs
  itself, then the resume functions (``__resume_at_*``) that continue after it. A break
  on a call continues in one resume function; a break on a jump (``if`` on a tensor's
  value) has one per branch, and a run takes only one of them.
* :func:`cache_view` draws a function's cache entries in the order the C frame-evaluation
  hook checks them: the first entry whose guards pass runs; if none does, Dynamo compiles.

Both take plain inputs (code objects, ``torch._dynamo.eval_frame._debug_get_cache_entry_list``
output) and return a :class:`GraphView` for ``show``::

    show(frames_view(pairs, fn.__globals__))
    show(cache_view(fn))
"""
from __future__ import annotations

import dis
import re
from types import CodeType

from .model import GraphView
from .styles import register_cluster_kind, register_kind

COMPILED_GRAPH, RESUME_CALL, PYTHON_CODE, CACHE_ENTRY, RECOMPILE = (
    "compiled_graph", "resume_call", "python_code", "cache_entry", "recompile")
MAX_GUARDS = 6   # guard lines shown per cache entry
MAX_TEXT = 90

register_kind(COMPILED_GRAPH, meaning="编译好的图 (compiled graph)", shape="box", style="rounded,filled",
              fillcolor="#d9ead3", color="#38761d")
register_kind(RESUME_CALL, meaning="续行函数 (resume function)", shape="cds", style="filled",
              fillcolor="#fff2cc", color="#bf9000")
register_kind(PYTHON_CODE, meaning="Python 自己执行的字节码", shape="note", style="filled",
              fillcolor="#f4cccc", color="#c62828")
register_kind(CACHE_ENTRY, meaning="缓存条目 (cache entry)", shape="box", style="rounded,filled",
              fillcolor="#cfe2f3", color="#3d85c6")
register_kind(RECOMPILE, meaning="重新编译 (recompile)", shape="octagon", style="filled",
              fillcolor="#f4cccc", color="#c62828")
register_cluster_kind("dynamo_frame", color="#3d85c6", style="rounded,bold")


def short_name(name: str) -> str:
    """``__compiled_fn_2_5063af86_…`` → ``__compiled_fn_2`` (the uuid only makes it unique)."""
    return re.sub(r"_[0-9a-f]{8}(_[0-9a-f]{4}){3}_[0-9a-f]{12}$", "", name)


def compiled_graphs(new_code: CodeType) -> list[str]:
    """The compiled graphs the new bytecode loads, in order, once each."""
    names = []
    for inst in dis.get_instructions(new_code):
        if inst.opname == "LOAD_GLOBAL" and inst.argval.startswith("__compiled_fn") and inst.argval not in names:
            names.append(inst.argval)
    return names


def resume_paths(new_code: CodeType) -> list[list[str]]:
    """The resume functions the new bytecode calls, one list per path that ends in a return.

    Each path returns what its resume calls return, so two paths are alternatives: the two
    branches of a jump that broke the graph. Calls on one path run one after the other.
    """
    paths, path = [], []
    for inst in dis.get_instructions(new_code):
        if inst.opname == "LOAD_GLOBAL" and inst.argval.startswith("__resume_at") and inst.argval not in path:
            path.append(inst.argval)
        elif inst.opname in ("RETURN_VALUE", "RETURN_CONST") and path:
            paths.append(path)
            path = []
    return paths + ([path] if path else [])


def _frame_running(module_globals: dict | None, name: str, codes: list[CodeType]) -> int | None:
    """Index of the frame whose code object is the resume function ``name``'s, if any."""
    resume_code = getattr((module_globals or {}).get(name), "__code__", None)
    return next((index for index, code in enumerate(codes) if code is resume_code), None)


def frames_view(pairs, module_globals: dict | None = None, *, title: str = "") -> GraphView:
    """``pairs`` = ``[(code, new_code), ...]`` from ``register_bytecode_hook``, in order.

    With ``module_globals`` (the function's ``__globals__``, where Dynamo installs the
    resume functions), a resume call is linked to the frame that runs its code object —
    by identity: the resume functions of two branches share their ``co_name``. A resume
    function no frame runs was never called, so never compiled.
    """
    view = GraphView(title=title or f"Dynamo 改写了 {len(pairs)} 个帧", direction="LR")
    codes = [code for code, _ in pairs]
    links = []
    for index, (code, new_code) in enumerate(pairs):
        ids = []
        for name in compiled_graphs(new_code):
            ids.append(f"f{index}.{short_name(name)}")
            view.add_node(ids[-1], short_name(name), COMPILED_GRAPH, ["运行捕获的 FX 图"])
        paths = resume_paths(new_code)
        if paths:
            ids.append(f"f{index}.python")
            view.add_node(ids[-1], "中断处的指令", PYTHON_CODE,
                          ["由 Python 照常执行"] + (["按条件跳到其中一支"] if len(paths) > 1 else []))
        for before, after in zip(ids, ids[1:]):
            view.add_edge(before, after)
        for path in paths:
            previous, label = f"f{index}.python", (f"{len(paths)} 选 1" if len(paths) > 1 else "")
            for name in path:
                node_id = f"f{index}.{short_name(name)}"
                frame = _frame_running(module_globals, name, codes)
                never_run = ["这次没有走到：没有编译"] if module_globals is not None and frame is None else []
                view.add_node(node_id, short_name(name), RESUME_CALL, ["调用续行函数"] + never_run)
                view.add_edge(previous, node_id, label)
                if frame is not None:
                    links.append((node_id, frame))
                ids.append(node_id)
                previous, label = node_id, ""
        if not ids:
            ids = [f"f{index}.empty"]
            view.add_node(ids[0], "（没有调用编译好的图）", PYTHON_CODE)
        view.add_cluster(f"frame{index}", f"帧 {index}: {code.co_name}", ids, kind="dynamo_frame")
    for node_id, frame in links:
        first = next(c for c in view.clusters if c.name == f"frame{frame}").node_ids[0]
        view.add_edge(node_id, first, "第一次调用时编译")
    return view


_SHORTER = [(r"DispatchKeySet\(.*?\), ", ""), (r", stride=\[.*?\]", ""), (r"Tensor, ", ""), (r"device=None, ", ""),
            (r"___check_type_id\((L\[.*?\]), \d+\), type=<class '(\w+)'>", r"type(\1) is \2")]


def _guard_lines(entry) -> list[str]:
    """The guards on the function's arguments (``L[...]``), as Dynamo prints them: from the
    printed guard tree, without tree prefixes, source comments and dynamic-marking checks."""
    lines = []
    for line in str(entry.guard_manager).splitlines():
        text = line.lstrip("|+- ").split("  #")[0].strip()
        if "L[" not in text or "hasattr(" in text or text.startswith("GuardManager"):
            continue
        for pattern, replacement in _SHORTER:
            text = re.sub(pattern, replacement, text)
        lines.append(text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…")
    return lines[:MAX_GUARDS]


def cache_view(entries, *, title: str = "") -> GraphView:
    """Cache entries (``_debug_get_cache_entry_list(fn)``) in lookup order, then "recompile"."""
    view = GraphView(title=title or f"{len(entries)} 个缓存条目，按查找顺序", direction="LR")
    previous = None
    for index, entry in enumerate(entries):
        node_id = f"entry{index}"
        view.add_node(node_id, f"编译 id {entry.compile_id}", CACHE_ENTRY, _guard_lines(entry))
        if previous is not None:
            view.add_edge(previous, node_id, "守卫未通过")
        previous = node_id
    view.add_node("recompile", "全部未通过：编译新条目", RECOMPILE)
    if previous is not None:
        view.add_edge(previous, "recompile", "守卫未通过")
    return view
