"""Reference solutions of chapter 05 (TorchDynamo).

Each function body is injected into the instructor's copy of
``notebooks/05_dynamo.ipynb`` between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so a
body may use only what the notebook imports: ``dis``, ``operator``, ``torch``, ``torch.fx as fx``,
``CompileCounter``, ``register_bytecode_hook`` and ``_debug_get_cache_entry_list``.
"""
import dis
import operator

import torch
import torch.fx as fx
from torch._dynamo.convert_frame import register_bytecode_hook
from torch._dynamo.eval_frame import _debug_get_cache_entry_list


def bytecode_to_fx(fn) -> fx.GraphModule:
    """Symbolically execute ``fn``'s bytecode (straight-line tensor code) into an FX graph."""
    binary_ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
                  "@": operator.matmul, "**": operator.pow, "//": operator.floordiv}
    null = object()                       # CPython's NULL stack entry (no `self`)

    class Method:                         # a Tensor method loaded from a graph value
        def __init__(self, name):
            self.name = name

    graph = fx.Graph()
    code = fn.__code__
    local_vars = {name: graph.placeholder(name) for name in code.co_varnames[:code.co_argcount]}
    stack, kw_names = [], ()

    def has_node(values):
        return any(isinstance(v, fx.Node) for v in values)

    def call(target, args, kwargs):
        if isinstance(target, Method):
            return graph.call_method(target.name, tuple(args), kwargs)
        if has_node(args) or has_node(kwargs.values()):
            return graph.call_function(target, tuple(args), kwargs)
        return target(*args, **kwargs)    # only constants: compute now, like Dynamo does

    for inst in dis.get_instructions(fn):
        op = inst.opname
        if op in ("RESUME", "NOP", "PRECALL", "CACHE", "EXTENDED_ARG"):
            continue
        if op in ("LOAD_FAST", "LOAD_FAST_CHECK"):
            stack.append(local_vars[inst.argval])
        elif op == "STORE_FAST":
            local_vars[inst.argval] = stack.pop()
        elif op == "LOAD_CONST":
            stack.append(inst.argval)
        elif op == "LOAD_GLOBAL":
            value = fn.__globals__.get(inst.argval, fn.__builtins__.get(inst.argval))
            stack += [null, value] if inst.arg & 1 else [value]
        elif op == "PUSH_NULL":
            stack.append(null)
        elif op == "LOAD_METHOD" or (op == "LOAD_ATTR" and inst.argrepr.startswith("NULL|self")):
            owner = stack.pop()           # 3.11: LOAD_METHOD; 3.12: LOAD_ATTR with the method bit
            if isinstance(owner, fx.Node):
                stack += [Method(inst.argval), owner]
            else:
                stack += [null, getattr(owner, inst.argval)]
        elif op == "LOAD_ATTR":
            owner = stack.pop()
            stack.append(graph.call_function(getattr, (owner, inst.argval)) if isinstance(owner, fx.Node)
                         else getattr(owner, inst.argval))
        elif op == "KW_NAMES":
            kw_names = code.co_consts[inst.arg]      # names of the next CALL's last arguments
        elif op == "CALL":
            args = stack[len(stack) - inst.arg:] if inst.arg else []
            del stack[len(stack) - inst.arg:]
            upper, lower = stack.pop(), stack.pop()
            if lower is null:             # NULL, callable, args...
                target = upper
            else:                         # method, self, args...
                target, args = lower, [upper] + args
            kwargs = {}
            if kw_names:
                kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
                args = args[:len(args) - len(kw_names)]
                kw_names = ()
            stack.append(call(target, args, kwargs))
        elif op == "BINARY_OP":
            right, left = stack.pop(), stack.pop()
            stack.append(call(binary_ops[inst.argrepr.rstrip("=")], [left, right], {}))
        elif op == "UNARY_NEGATIVE":
            stack.append(call(operator.neg, [stack.pop()], {}))
        elif op == "RETURN_VALUE":
            graph.output(stack.pop())
            break
        elif op == "RETURN_CONST":
            graph.output(inst.argval)
            break
        else:
            raise RuntimeError(f"unsupported instruction {op} at offset {inst.offset}")
    return fx.GraphModule(torch.nn.Module(), graph)


def inspect_bytecode(fn, args: tuple) -> list[dict]:
    """For each frame Dynamo compiles while running ``fn`` once: which compiled graphs and
    resume functions its new bytecode calls."""
    pairs = []
    handle = register_bytecode_hook(lambda code, new_code: pairs.append((code, new_code)))
    try:
        torch.compile(fn, backend="eager")(*args)
    finally:
        handle.remove()
    report = []
    for code, new_code in pairs:
        names = {inst.argval for inst in dis.get_instructions(new_code) if inst.opname == "LOAD_GLOBAL"}
        report.append({"name": code.co_name,
                       "compiled": sum(name.startswith("__compiled_fn") for name in names),
                       "resumes": sum(name.startswith("__resume_at") for name in names)})
    return report


def predict_recompiles(calls: list[dict], dynamic) -> list[bool]:
    """Which calls of ``torch.compile(scale_shift, dynamic=dynamic)`` compile a new entry."""
    limit = torch._dynamo.config.recompile_limit
    entries, first_seen, dynamic_keys = [], {}, set()
    compiles = []
    for call in calls:
        hit = any(all(key in entry_dynamic or entry[key] == call[key] for key in call)
                  for entry, entry_dynamic in entries)
        if hit or len(entries) >= limit:
            compiles.append(False)
            continue
        if dynamic is None:               # automatic dynamic: a size or int that changed becomes symbolic
            for key in ("size", "n"):
                first_seen.setdefault(key, call[key])
                if call[key] != first_seen[key]:
                    dynamic_keys.add(key)
        entries.append((dict(call), set(dynamic_keys)))
        compiles.append(True)
    return compiles


def compile_once(fn, backend):
    """``fn(x, w)`` compiled once for every batch size 2–64: only dimension 0 of ``x`` is dynamic."""
    compiled = torch.compile(fn, backend=backend)

    def run(x, w):
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x, w)
    return run


def cached_entry(fn, args: tuple):
    """The compile id of the cache entry that a call ``fn(*args)`` would run, or None (a recompile)."""
    frame_locals = dict(zip(fn.__code__.co_varnames, args))
    for entry in _debug_get_cache_entry_list(fn):
        if entry.guard_manager.check(frame_locals):
            return str(entry.compile_id)
    return None
