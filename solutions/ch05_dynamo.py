"""Reference solutions of chapter 05 (TorchDynamo).

Each function body is injected into the instructor's copy of
``notebooks/05_dynamo.ipynb`` between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so a
body may use only what the notebook imports: ``dis``, ``operator``, ``sys``, ``Counter``, ``torch``,
``torch.fx as fx`` and ``aot_autograd``.
"""
import dis
import operator
import sys
from collections import Counter

import torch
import torch.fx as fx
from torch._dynamo.backends.common import aot_autograd


def bytecode_to_fx(fn) -> fx.GraphModule:
    """Symbolically execute ``fn``'s bytecode (straight-line tensor code) into an FX graph,
    on CPython 3.11, 3.12 and 3.13."""
    binary_ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
                  "@": operator.matmul}
    null = object()                                  # CPython's NULL stack entry (no `self`)
    method_flag = sys.version_info >= (3, 12)        # LOAD_ATTR's low bit: "load a method"
    null_after = sys.version_info >= (3, 13)         # 3.13 pushes NULL above the callable

    class Method:                                    # a Tensor method loaded from a graph value
        def __init__(self, name):
            self.name = name

    graph = fx.Graph()
    code = fn.__code__
    local_vars = {name: graph.placeholder(name) for name in code.co_varnames[:code.co_argcount]}
    stack, kw_names = [], ()

    def pop(count):
        values = stack[len(stack) - count:]
        del stack[len(stack) - count:]
        return values

    def push_with_null(value):
        stack.extend([value, null] if null_after else [null, value])

    def load_method(owner, name):                    # (method, self) or NULL and the attribute
        if isinstance(owner, fx.Node):
            stack.extend([Method(name), owner])
        else:
            push_with_null(getattr(owner, name))

    def call(target, args, kwargs):
        if isinstance(target, Method):
            return graph.call_method(target.name, tuple(args), kwargs)
        if any(isinstance(v, fx.Node) for v in [*args, *kwargs.values()]):
            return graph.call_function(target, tuple(args), kwargs)
        return target(*args, **kwargs)               # only constants: compute now, like Dynamo does

    for inst in dis.get_instructions(fn):
        op = inst.opname
        if op in ("RESUME", "PRECALL"):
            continue
        if op == "LOAD_FAST":
            stack.append(local_vars[inst.argval])
        elif op == "LOAD_FAST_LOAD_FAST":            # 3.13: two locals, argval is their names
            stack.extend(local_vars[name] for name in inst.argval)
        elif op == "STORE_FAST":
            local_vars[inst.argval] = stack.pop()
        elif op == "LOAD_CONST":
            stack.append(inst.argval)
        elif op == "LOAD_GLOBAL":                    # the low bit: a call follows, push NULL too
            if inst.arg & 1:
                push_with_null(fn.__globals__[inst.argval])
            else:
                stack.append(fn.__globals__[inst.argval])
        elif op == "PUSH_NULL":
            stack.append(null)
        elif op == "LOAD_METHOD" or (op == "LOAD_ATTR" and method_flag and inst.arg & 1):
            load_method(stack.pop(), inst.argval)
        elif op == "LOAD_ATTR":                      # a plain attribute: torch.nn, F.silu
            stack.append(getattr(stack.pop(), inst.argval))
        elif op == "KW_NAMES":                       # 3.11, 3.12: names of the next CALL's last arguments
            kw_names = code.co_consts[inst.arg]
        elif op in ("CALL", "CALL_KW"):
            if op == "CALL_KW":                      # 3.13: the names are on top of the arguments
                kw_names = stack.pop()
            args = pop(inst.arg)
            lower, upper = pop(2)
            if lower is null:                        # 3.11, 3.12: NULL, callable, args...
                target = upper
            elif upper is null:                      # 3.13: callable, NULL, args...
                target = lower
            else:                                    # method, self, args...
                target, args = lower, [upper] + args
            positional = len(args) - len(kw_names)
            stack.append(call(target, args[:positional], dict(zip(kw_names, args[positional:]))))
            kw_names = ()
        elif op == "BINARY_OP":
            right, left = stack.pop(), stack.pop()
            stack.append(call(binary_ops[inst.argrepr], [left, right], {}))
        elif op == "UNARY_NEGATIVE":
            stack.append(call(operator.neg, [stack.pop()], {}))
        elif op == "RETURN_VALUE":
            graph.output(stack.pop())
            break
        else:
            raise RuntimeError(f"unsupported instruction {op} at offset {inst.offset}")
    return fx.GraphModule(torch.nn.Module(), graph)


def aten_histogram_backend(report: list):
    """A backend that hands each graph to AOTAutograd and notes the ATen ops of the graph
    AOTAutograd gives back, once per graph (at compile time)."""
    def count_aten_ops(gm, example_inputs):
        report.append(dict(Counter(str(node.target) for node in gm.graph.nodes if node.op == "call_function")))
        return gm.forward
    return aot_autograd(fw_compiler=count_aten_ops)


def build_guard(example: dict):
    """The guards of the cache entry ``blend(**example)`` compiles: what the trace read of
    each argument (``note`` is never read)."""
    def guarded_view(value):                       # equal views = the guards accept
        if isinstance(value, torch.Tensor):        # TENSOR_MATCH: metadata, never the values
            return ("tensor", value.dtype, value.device, tuple(value.shape), value.stride(), value.requires_grad)
        if isinstance(value, (list, tuple)):       # type, length, then each element
            return (type(value), tuple(guarded_view(item) for item in value))
        return (type(value), value)                # constants baked into the graph: type and value

    read = ("x", "y", "alpha", "mode", "shifts")
    expected = {name: guarded_view(example[name]) for name in read}
    return lambda call: all(guarded_view(call[name]) == view for name, view in expected.items())


def predict_recompiles(calls: list[dict], dynamic) -> list[bool]:
    """Which calls of ``torch.compile(scale_shift, dynamic=dynamic)`` compile a new entry."""
    limit = torch._dynamo.config.recompile_limit
    entries, first, changed = [], None, set()     # changed: fields seen with a second value (sticky)
    compiles = []

    def accepts(entry, entry_dynamic, call):
        return all(field_accepts(key, entry[key], call[key], key in entry_dynamic) for key in call)

    def field_accepts(key, compiled, value, is_dynamic):
        if not is_dynamic:
            return compiled == value
        return key != "size" or value >= 2        # 0/1 specialisation: a size 0 or 1 is never symbolic

    for call in calls:
        if any(accepts(entry, entry_dynamic, call) for entry, entry_dynamic in entries) or len(entries) >= limit:
            compiles.append(False)
            continue
        first = first or call
        if dynamic is None:                        # automatic dynamic: a size or int that changed becomes symbolic
            changed |= {key for key in ("size", "n") if call[key] != first[key]}
        entry_dynamic = {key for key in changed if not (key == "size" and call["size"] < 2)}
        entries.append((dict(call), entry_dynamic))
        compiles.append(True)
    return compiles


def storm_free(fn, backend):
    """``fn(x, w, scale)`` compiled once for every batch size and scale: the batch dimension
    is unbacked (no 0/1 specialisation, no duck sizing), the scale a graph input."""
    compiled = torch.compile(fn, backend=backend)

    def run(x, w, scale):
        torch._dynamo.decorators.mark_unbacked(x, 0)
        return compiled(x, w, torch.tensor(scale, dtype=x.dtype))
    return run
