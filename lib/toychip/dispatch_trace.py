"""Watch the dispatcher: which keys each op call visits and which kernel runs there.

The C++ dispatcher does not log, but its *Python dispatcher* mode asks Python, for every
(op, dispatch key) it is about to run, which kernel to use
(``OpOverload._get_dispatch``). :func:`trace_dispatch` answers the question as usual and
writes the answer down, so one call becomes its real path (chapter 07)::

    trace = trace_dispatch(torch.add, x, x)        # x on the toy chip
    trace.path()      # ['AutogradPrivateUse1', 'PrivateUse1']
    print(trace)      # one line per step: op, key, what ran
    show(trace.view())

Keys whose kernel is a *fallthrough* (ADInplaceOrView for functional ops, Autocast for
ops autocast leaves alone) are skipped by the dispatcher and so never appear. Limits:
a kernel that redispatches from C++ with a fresh key set (BackendSelect, for example)
hides the steps below it, and ops with Python decompositions may take those instead
(the trace says "Python decomposition").
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
import torch._ops
from graphviews import GraphView, to_view
from torch._C import DispatchKey
from torch._dispatch.python import enable_python_dispatcher

# What runs at a step, by the key of the registration the dispatcher resolved to.
_KERNEL_ROLES = {
    "Autograd": "autograd kernel: records grad_fn, then redispatches",
    "CompositeImplicitAutograd": "composite: decomposes into other ops",
    "CompositeExplicitAutograd": "composite explicit kernel",
    "CompositeExplicitAutogradNonFunctional": "composite: allocates, calls the out= op",
    "BackendSelect": "picks the backend from the arguments",
    "ADInplaceOrView": "bumps version counters / sets up the view",
    "CPU": "CPU kernel",
    "Meta": "Meta kernel (shapes only)",
    "Python": "__torch_dispatch__ mode",
}


@dataclass(frozen=True)
class DispatchStep:
    """One kernel the dispatcher ran: ``op`` at dispatch key ``key``; ``kernel`` says what it was."""

    op: str
    key: str
    kernel: str


@dataclass
class DispatchTrace:
    """The steps of everything a traced call dispatched, in the order they ran."""

    steps: list[DispatchStep] = field(default_factory=list)
    title: str = "dispatch path"

    def ops(self) -> list[str]:
        """Every op that was dispatched, first appearance order."""
        return list(dict.fromkeys(step.op for step in self.steps))

    def path(self, op: str | None = None) -> list[str]:
        """Keys visited by the first call of ``op`` (default: the first op traced).

        ``op`` is a full name (``aten.add.Tensor``) or a packet name (``add``). Steps of
        other ops in between (an autocast kernel's casts) are skipped; the path ends
        where priority stops falling, i.e. where a later call of the same op begins.
        """
        if not self.steps:
            return []
        op = self.steps[0].op if op is None else op
        keys = [s.key for s in self.steps if _matches(s.op, op)]
        path = keys[:1]
        for key in keys[1:]:
            if _priority(key) >= _priority(path[-1]):
                break
            path.append(key)
        return path

    def view(self, max_steps: int = 40, only=None) -> GraphView:
        """The steps as a chain for ``graphviews.show``: key nodes, labelled with op and kernel.

        ``only`` keeps the steps of these ops (names as in :meth:`path`). An edge between
        steps of the same op is a ``redispatch``; an edge to another op means that op was
        dispatched ``next`` (called by the kernel before, or after it).
        """
        view = GraphView(title=self.title)
        steps = [s for s in self.steps if only is None or any(_matches(s.op, name) for name in only)]
        previous = None
        for i, step in enumerate(steps[:max_steps]):
            node_id = f"step{i}"
            view.add_node(node_id, step.key, _node_kind(step), [step.op, step.kernel])
            if previous is not None:
                same_op = previous.op == step.op
                view.add_edge(f"step{i - 1}", node_id, "redispatch" if same_op else "next")
            previous = step
        if len(steps) > max_steps:
            view.add_node("more", f"... {len(steps) - max_steps} more steps", "ellipsis")
            view.add_edge(f"step{max_steps - 1}", "more")
        return view

    def __str__(self) -> str:
        lines = [f"{'op':<34} {'dispatch key':<22} kernel"]
        lines += [f"{s.op:<34} {s.key:<22} {s.kernel}" for s in self.steps]
        return "\n".join(lines)


def _matches(op_name: str, name: str) -> bool:
    """``aten.cumsum.out`` matches itself, ``cumsum.out`` and ``cumsum``."""
    return name in (op_name, op_name.partition(".")[2], op_name.split(".")[1])


def _priority(key: str) -> int:
    """The key's rank (higher runs first): its own one-key set read as a number. Functionality
    bits sit above the backend bits, so this ranks by functionality, then by backend, as
    ``highestPriorityTypeId`` does (the set's printout is no ranking to parse: it hides
    functionality bits that have no backend bit)."""
    return torch._C.DispatchKeySet(getattr(DispatchKey, key)).raw_repr()


def _node_kind(step: DispatchStep) -> str:
    if step.kernel.startswith("toychip kernel"):
        return "chip"
    return "cpu" if step.kernel.startswith("toychip fallback") else "dispatch_key"


def _describe(op: torch._ops.OpOverload, key: DispatchKey, resolved) -> str:
    """What the dispatcher will run for ``op`` at ``key`` (``resolved``: what Python answered)."""
    if not isinstance(resolved, DispatchKey):
        return "Python decomposition"
    if resolved == key and not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key):
        if key == DispatchKey.PrivateUse1:
            return "toychip fallback: runs it on the CPU"
        return f"{key.name} backend fallback (shared by all ops)"
    if key == DispatchKey.PrivateUse1 and resolved == key:
        return "toychip kernel"
    if resolved.name.startswith("Autocast"):
        return "autocast: casts inputs, calls the op again"
    return _KERNEL_ROLES.get(resolved.name, f"{resolved.name} kernel")


_recording: list[DispatchStep] | None = None
_original_get_dispatch = torch._ops.OpOverload._get_dispatch


def _recording_get_dispatch(self, key):
    resolved = _original_get_dispatch(self, key)
    if _recording is not None:
        _recording.append(DispatchStep(str(self), key.name, _describe(self, key, resolved)))
        self._dispatch_cache.pop(key, None)  # ask again next time: record every call
    return resolved


def _clear_dispatch_caches() -> None:
    for op in list(torch._ops.cached_ops):
        op._dispatch_cache.clear()


@contextlib.contextmanager
def recording():
    """Inside the block, every dispatched (op, key) is appended to the yielded trace."""
    global _recording
    if _recording is not None:
        raise RuntimeError("trace_dispatch cannot be nested")
    trace = DispatchTrace()
    _clear_dispatch_caches()
    _recording = trace.steps
    torch._ops.OpOverload._get_dispatch = _recording_get_dispatch
    try:
        with enable_python_dispatcher():
            yield trace
    finally:
        torch._ops.OpOverload._get_dispatch = _original_get_dispatch
        _recording = None
        _clear_dispatch_caches()


def trace_dispatch(fn, *args, title: str | None = None, **kwargs) -> DispatchTrace:
    """Call ``fn(*args, **kwargs)`` once and return the dispatch steps it took."""
    with recording() as trace:
        fn(*args, **kwargs)
    trace.title = title or f"dispatch path of {getattr(fn, '__name__', 'call')}"
    return trace


to_view.register(DispatchTrace, lambda trace, **options: trace.view(**options))
