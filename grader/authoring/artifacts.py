"""Turn what a learner's function returns into comparable artifacts, and compare them.

Artifacts are plain data (lists of node labels, dicts of counts, tensors) so that they
can cross a process boundary; every comparison is phrased for learners, in Chinese.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.fx as fx

from ..sandbox.graph_codec import GraphCodecError, decode, encode
from .exercise import PASS, Verdict

MAX_SHOWN = 300  # characters of expected/got shown in feedback


def seeded_build(seed: int, make: Callable[[], dict]) -> Callable[[], dict]:
    """A ``Case.build`` that makes the same weights and inputs on every call."""
    def build() -> dict:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return make()
    return build


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + " …"


def node_label(node: fx.Node, gm: fx.GraphModule) -> str:
    """What a node does: function/method name, module class, or the opcode itself."""
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    if node.op == "call_method":
        return node.target
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    return node.op


def graph_pass_artifact(function: Callable, built: dict) -> dict:
    """Sandbox side: run a graph pass on ``built["module"]`` and serialise the graph it returns."""
    result = function(built["module"])
    if not isinstance(result, fx.GraphModule):
        return {"error": f"函数应返回 torch.fx.GraphModule，实际返回了 {type(result).__name__}。"}
    if not _code_matches_graph(result):
        return {"error": "返回的 GraphModule 的代码与它的图不一致：改完图之后要调用 gm.recompile()，"
                         "否则调用这个模块时运行的还是改写之前的代码。"}
    try:
        return {"graph": encode(result)}
    except GraphCodecError as error:
        return {"error": f"返回的图无法评分：{error}（图中只能调用 torch 的函数、Tensor 方法和 torch.nn 的层）。"}


def _code_matches_graph(gm: fx.GraphModule) -> bool:
    """Whether ``gm`` runs its graph: a pass that edits the graph must ``recompile()`` it
    (the serialised graph would hide a stale ``forward``, since it is rebuilt from the graph)."""
    try:
        return gm.code == gm.graph.python_code(root_module="self").src
    except Exception:  # a graph that cannot be turned into code: the codec says why
        return True


def graph_facts(artifact: dict, built: dict, *, drop_unused: bool = False) -> dict:
    """Trusted side: rebuild the graph from its serialised form (``drop_unused``: without
    nodes nothing uses), list its nodes, run it."""
    if "error" in artifact:
        return artifact
    try:
        gm = decode(artifact["graph"])
    except GraphCodecError as error:
        return {"error": f"返回的图不合法，无法重建：{error}"}
    if drop_unused:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    try:
        with torch.no_grad():
            outputs = gm(*built["inputs"])
    except Exception as error:
        return {"error": f"在用例输入上运行返回的图时出错：{type(error).__name__}: {error}"}
    return {"nodes": [node_label(n, gm) for n in gm.graph.nodes], "outputs": outputs}


def artifact_error(got: Any) -> Verdict | None:
    if isinstance(got, dict) and "error" in got:
        return Verdict(False, got["error"])
    return None


def compare_outputs(expected: Any, got: Any, *, atol: float = 1e-5, rtol: float = 1e-4,
                    label: str | None = None) -> Verdict:
    """Tensors (or tuples of tensors) equal within tolerance, same shapes and dtypes.

    ``label`` names what is compared ("分区后图的输出"): a failure then says that it differs
    from the reference, in place of the generic wording, with the same expected/got."""
    verdict = _compare_tensors(expected, got, atol, rtol)
    if verdict.ok or label is None:
        return verdict
    return Verdict(False, f"{label}与参考实现不一致。", verdict.expected, verdict.got)


def _compare_tensors(expected: Any, got: Any, atol: float, rtol: float) -> Verdict:
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return Verdict(False, "输出的个数与参考实现不同。", short(len(expected)), short(got))
        for e, g in zip(expected, got):
            verdict = _compare_tensors(e, g, atol, rtol)
            if not verdict.ok:
                return verdict
        return PASS
    if not isinstance(got, torch.Tensor) or type(got) is not torch.Tensor:
        return Verdict(False, "输出应是普通的 torch.Tensor。", "torch.Tensor", type(got).__name__)
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return Verdict(False, "输出的形状或 dtype 与参考实现不同。",
                       f"{tuple(expected.shape)} {expected.dtype}", f"{tuple(got.shape)} {got.dtype}")
    if not torch.allclose(got, expected, atol=atol, rtol=rtol):
        worst = (got - expected).abs().max().item()
        return Verdict(False, f"改写后的图在同一输入上的输出与参考实现不同（最大误差 {worst:.3g}）。",
                       short(expected.flatten()[:6]), short(got.flatten()[:6]))
    return PASS


def compare_equal(expected: Any, got: Any, message: str) -> Verdict:
    return PASS if expected == got else Verdict(False, message, short(expected), short(got))
