"""Plausible wrong answers to chapter 05's exercises, each with the belief it embodies; the checks must reject each one."""
import dis
import operator

import torch
import torch.fx as fx
from torch._dynamo.convert_frame import register_bytecode_hook
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "@": operator.matmul}


def _trace(fn, *, swap_operands=False, every_local=False):
    """A bytecode tracer with one of two classic bugs (used by the wrong tracers below)."""
    null = object()

    class Method:
        def __init__(self, name):
            self.name = name

    graph = fx.Graph()
    code = fn.__code__
    inputs = code.co_varnames if every_local else code.co_varnames[:code.co_argcount]
    local_vars = {name: graph.placeholder(name) for name in inputs}
    stack, kw_names = [], ()

    def call(target, args, kwargs):
        if isinstance(target, Method):
            return graph.call_method(target.name, tuple(args), kwargs)
        if any(isinstance(a, fx.Node) for a in list(args) + list(kwargs.values())):
            return graph.call_function(target, tuple(args), kwargs)
        return target(*args, **kwargs)

    for inst in dis.get_instructions(fn):
        op = inst.opname
        if op in ("RESUME", "NOP", "PRECALL", "CACHE"):
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
            owner = stack.pop()
            stack += [Method(inst.argval), owner] if isinstance(owner, fx.Node) else [null, getattr(owner, inst.argval)]
        elif op == "LOAD_ATTR":
            stack.append(getattr(stack.pop(), inst.argval))
        elif op == "KW_NAMES":
            kw_names = code.co_consts[inst.arg]
        elif op == "CALL":
            args = stack[len(stack) - inst.arg:] if inst.arg else []
            del stack[len(stack) - inst.arg:]
            upper, lower = stack.pop(), stack.pop()
            target, args = (upper, args) if lower is null else (lower, [upper] + args)
            kwargs = {}
            if kw_names:
                kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
                args, kw_names = args[:len(args) - len(kw_names)], ()
            stack.append(call(target, args, kwargs))
        elif op == "BINARY_OP":
            left, right = stack.pop(), stack.pop()        # bug when swap_operands: TOS is the *right* operand
            if not swap_operands:
                left, right = right, left
            stack.append(call(_BINARY[inst.argrepr.rstrip("=")], [left, right], {}))
        elif op == "UNARY_NEGATIVE":
            stack.append(call(operator.neg, [stack.pop()], {}))
        elif op == "RETURN_VALUE":
            graph.output(stack.pop())
            break
        else:
            raise RuntimeError(f"unsupported {op}")
    return fx.GraphModule(torch.nn.Module(), graph)


def bytecode_to_fx_swapped_operands(fn):
    """Pops the left operand first: ``1 - gate`` becomes ``gate - 1``."""
    return _trace(fn, swap_operands=True)


def bytecode_to_fx_every_local(fn):
    """Makes a placeholder for every name in ``co_varnames``: locals like ``y`` are not inputs."""
    return _trace(fn, every_local=True)


def inspect_bytecode_first_frame_only(fn, args):
    """Keeps only the first transformed frame: misses the resume functions' frames."""
    pairs = []
    handle = register_bytecode_hook(lambda code, new_code: pairs.append((code, new_code)))
    try:
        torch.compile(fn, backend="eager")(*args)
    finally:
        handle.remove()
    code, new_code = pairs[0]
    names = {i.argval for i in dis.get_instructions(new_code) if i.opname == "LOAD_GLOBAL"}
    return [{"name": code.co_name, "compiled": sum(n.startswith("__compiled_fn") for n in names),
             "resumes": sum(n.startswith("__resume_at") for n in names)}]


def inspect_bytecode_from_explain(fn, args):
    """Counts graphs and breaks with ``explain`` instead of reading the new bytecode."""
    explained = torch._dynamo.explain(fn)(*args)
    return [{"name": fn.__code__.co_name, "compiled": explained.graph_count,
             "resumes": explained.graph_break_count}]


def predict_recompiles_tensors_only(calls, dynamic):
    """"Dynamo guards only tensors": ignores the Python int ``n`` and bool ``flag``."""
    entries, first_size, dynamic_size, result = [], None, False, []
    for call in calls:
        key = (call["size"], call["dtype"], call["requires_grad"])
        if any(k[1:] == key[1:] and (dyn or k[0] == key[0]) for k, dyn in entries):
            result.append(False)
            continue
        first_size = call["size"] if first_size is None else first_size
        dynamic_size = dynamic_size or (dynamic is None and call["size"] != first_size)
        entries.append((key, dynamic_size))
        result.append(True)
    return result


def predict_recompiles_shape_only(calls, dynamic):
    """Knows automatic dynamic for sizes but forgets that ints, bools, dtypes and requires_grad are guarded."""
    sizes, dynamic_size, result = [], False, []
    for call in calls:
        if call["size"] in sizes or dynamic_size:
            result.append(False)
            continue
        result.append(True)
        dynamic_size = dynamic is None and bool(sizes)
        sizes.append(call["size"])
    return result


def compile_once_dynamic_true(fn, backend):
    """``dynamic=True``: every dimension symbolic, so a batch of 8 is duck-sized with the features."""
    return torch.compile(fn, backend=backend, dynamic=True)


def compile_once_default(fn, backend):
    """The default ``dynamic=None``: a static graph first, then a dynamic one."""
    return torch.compile(fn, backend=backend)


def cached_entry_oldest_first(fn, args):
    """Checks the oldest entry first (compile order), not the order the C lookup uses."""
    frame_locals = dict(zip(fn.__code__.co_varnames, args))
    for entry in reversed(_debug_get_cache_entry_list(fn)):
        if entry.guard_manager.check(frame_locals):
            return str(entry.compile_id)
    return None


def cached_entry_first_always(fn, args):
    """Returns the first entry without checking its guards."""
    entries = _debug_get_cache_entry_list(fn)
    return str(entries[0].compile_id) if entries else None


WRONG_ANSWERS = [
    ("05.bytecode_tracer", bytecode_to_fx_swapped_operands,
     "Pops the left operand first: ``1 - gate`` becomes ``gate - 1``."),
    ("05.bytecode_tracer", bytecode_to_fx_every_local,
     "Makes a placeholder for every name in ``co_varnames``: locals like ``y`` are not inputs."),
    ("05.bytecode_inspector", inspect_bytecode_first_frame_only,
     "Keeps only the first transformed frame: misses the resume functions' frames."),
    ("05.bytecode_inspector", inspect_bytecode_from_explain,
     "Counts graphs and breaks with ``explain`` instead of reading the new bytecode."),
    ("05.guard_predictor", predict_recompiles_tensors_only,
     "'Dynamo guards only tensors': ignores the Python int ``n`` and bool ``flag``."),
    ("05.guard_predictor", predict_recompiles_shape_only,
     "Knows automatic dynamic for sizes but forgets that ints, bools, dtypes and requires_grad are guarded."),
    ("05.compile_once", compile_once_dynamic_true,
     "``dynamic=True``: every dimension symbolic, so a batch of 8 is duck-sized with the features."),
    ("05.compile_once", compile_once_default,
     "The default ``dynamic=None``: a static graph first, then a dynamic one."),
    ("05.cache_lookup", cached_entry_oldest_first,
     "Checks the oldest entry first (compile order), not the order the C lookup uses."),
    ("05.cache_lookup", cached_entry_first_always,
     "Returns the first entry without checking its guards."),
]
