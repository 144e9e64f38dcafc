"""Answers to chapter 05's exercises: plausible wrong ones, each with the belief it embodies
(the checks must reject each one), and right ones written differently from the reference
(every case must accept them).

Self-contained (no import of the references): tests paste this module into notebooks
that are graded in the sandbox, where the solutions are hidden. Which wrong tracers exist
depends on the Python running them: a tracer that assumes 3.11's opcodes is wrong only on
3.12+, one that reads 3.12's method flag into 3.11's LOAD_ATTR only on 3.11.
"""
import dis
import operator
import sys
from collections import Counter

import torch
import torch.fx as fx
from torch._dynamo.backends.common import aot_autograd


# --- 05.bytecode_tracer ---------------------------------------------------------------

_NULL = object()        # CPython's NULL stack entry


class _Method:
    """A Tensor method loaded from a graph value: called as ``graph.call_method``."""

    def __init__(self, name):
        self.name = name


class _Tracer:
    """A right tracer with one method per opcode, the shape of Dynamo's InstructionTranslator;
    torch functions for the operators. Each wrong tracer below overrides the rule it gets wrong."""

    # each operator: the torch function recorded in the graph, the Python one that folds constants
    BINARY = {"+": (torch.add, operator.add), "-": (torch.sub, operator.sub), "*": (torch.mul, operator.mul),
              "/": (torch.div, operator.truediv), "@": (torch.matmul, operator.matmul)}

    def __init__(self, fn):
        self.fn, self.code, self.graph = fn, fn.__code__, fx.Graph()
        self.locals = {name: self.graph.placeholder(name) for name in self.inputs()}
        self.stack, self.kw_names, self.done = [], (), False

    def inputs(self):
        return self.code.co_varnames[:self.code.co_argcount]

    def run(self) -> fx.GraphModule:
        for inst in dis.get_instructions(self.fn):
            handler = getattr(self, inst.opname, None)
            if handler is None:
                raise RuntimeError(f"unsupported instruction {inst.opname}")
            handler(inst)
            if self.done:
                break
        return fx.GraphModule(torch.nn.Module(), self.graph)

    def pop(self, count):
        values = self.stack[len(self.stack) - count:]
        del self.stack[len(self.stack) - count:]
        return values

    def emit(self, target, args, kwargs):
        if isinstance(target, _Method):
            return self.graph.call_method(target.name, tuple(args), kwargs)
        if any(isinstance(v, fx.Node) for v in [*args, *kwargs.values()]):
            return self.graph.call_function(target, tuple(args), kwargs)
        return target(*args, **kwargs)

    def skip(self, inst):
        pass

    RESUME = PRECALL = skip

    def LOAD_FAST(self, inst):
        self.stack.append(self.locals[inst.argval])

    def LOAD_FAST_LOAD_FAST(self, inst):
        self.stack += [self.locals[name] for name in inst.argval]

    def STORE_FAST(self, inst):
        self.locals[inst.argval] = self.stack.pop()

    def LOAD_CONST(self, inst):
        self.stack.append(inst.argval)

    def LOAD_GLOBAL(self, inst):
        if "NULL" in inst.argrepr:                        # "NULL + relu" or "relu + NULL"
            self.stack.append(_NULL)
        self.stack.append(self.fn.__globals__[inst.argval])

    def PUSH_NULL(self, inst):
        self.stack.append(_NULL)

    def LOAD_METHOD(self, inst):
        owner = self.stack.pop()
        self.stack += [_Method(inst.argval), owner] if isinstance(owner, fx.Node) \
            else [_NULL, getattr(owner, inst.argval)]

    def LOAD_ATTR(self, inst):
        if self.loads_method(inst):
            self.LOAD_METHOD(inst)
        else:
            self.stack.append(getattr(self.stack.pop(), inst.argval))

    def loads_method(self, inst):
        return "NULL|self" in inst.argrepr                # 3.12: "NULL|self + sum", 3.13: "sum + NULL|self"

    def KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]

    def CALL(self, inst):
        args = self.pop(inst.arg)
        lower, upper = self.pop(2)
        if _NULL in (lower, upper):
            target = upper if lower is _NULL else lower
        else:
            target, args = lower, [upper] + args
        split = len(args) - len(self.kw_names)
        self.stack.append(self.emit(target, args[:split], dict(zip(self.kw_names, args[split:]))))
        self.kw_names = ()

    def CALL_KW(self, inst):
        self.kw_names = self.stack.pop()
        self.CALL(inst)

    def BINARY_OP(self, inst):
        right, left = self.stack.pop(), self.stack.pop()
        self.stack.append(self.binary(inst.argrepr, left, right))

    def binary(self, symbol, left, right):
        in_graph, in_python = self.BINARY[symbol]
        if isinstance(left, fx.Node) or isinstance(right, fx.Node):
            return self.graph.call_function(in_graph, (left, right))
        return in_python(left, right)

    def UNARY_NEGATIVE(self, inst):
        value = self.stack.pop()
        self.stack.append(self.graph.call_function(torch.neg, (value,)) if isinstance(value, fx.Node) else -value)

    def RETURN_VALUE(self, inst):
        self.graph.output(self.stack.pop())
        self.done = True


def bytecode_to_fx_opcode_methods(fn):
    return _Tracer(fn).run()


class _SwappedOperands(_Tracer):
    def BINARY_OP(self, inst):
        left, right = self.stack.pop(), self.stack.pop()
        self.stack.append(self.binary(inst.argrepr, left, right))


def bytecode_to_fx_swapped_operands(fn):
    return _SwappedOperands(fn).run()


class _EveryLocalIsInput(_Tracer):
    def inputs(self):
        return self.code.co_varnames


def bytecode_to_fx_every_local(fn):
    return _EveryLocalIsInput(fn).run()


class _GraphValueFirst(_Tracer):
    def binary(self, symbol, left, right):
        if isinstance(right, fx.Node) and not isinstance(left, fx.Node):
            left, right = right, left                     # 1 - gate recorded as gate - 1
        return super().binary(symbol, left, right)


def bytecode_to_fx_graph_value_first(fn):
    return _GraphValueFirst(fn).run()


class _NoConstantFolding(_Tracer):
    def emit(self, target, args, kwargs):
        if isinstance(target, _Method):
            return self.graph.call_method(target.name, tuple(args), kwargs)
        return self.graph.call_function(target, tuple(args), kwargs)

    def binary(self, symbol, left, right):
        return self.graph.call_function(self.BINARY[symbol][0], (left, right))


def bytecode_to_fx_without_constant_folding(fn):
    return _NoConstantFolding(fn).run()


class _TorchFunctionFoldsConstants(_Tracer):
    def binary(self, symbol, left, right):
        return self.emit(self.BINARY[symbol][0], [left, right], {})


def bytecode_to_fx_torch_function_folds_constants(fn):
    return _TorchFunctionFoldsConstants(fn).run()


class _KeywordsAsPositional(_Tracer):
    def KW_NAMES(self, inst):
        pass

    def CALL_KW(self, inst):
        self.stack.pop()
        self.CALL(inst)


def bytecode_to_fx_keywords_as_positional(fn):
    return _KeywordsAsPositional(fn).run()


class _KeywordNamesKept(_Tracer):
    def CALL(self, inst):
        names = self.kw_names
        super().CALL(inst)
        self.kw_names = names                             # still applied to the next calls


def bytecode_to_fx_keyword_names_kept(fn):
    return _KeywordNamesKept(fn).run()


class _NegationAsZeroMinus(_Tracer):
    def UNARY_NEGATIVE(self, inst):
        self.stack.append(self.binary("-", 0, self.stack.pop()))


def bytecode_to_fx_negation_as_zero_minus(fn):
    return _NegationAsZeroMinus(fn).run()


class _NullAlwaysBelow(_Tracer):
    def CALL(self, inst):
        args = self.pop(inst.arg)
        lower, upper = self.pop(2)
        target, args = (upper, args) if lower is _NULL else (lower, [upper] + args)
        split = len(args) - len(self.kw_names)
        self.stack.append(self.emit(target, args[:split], dict(zip(self.kw_names, args[split:]))))
        self.kw_names = ()


def bytecode_to_fx_null_always_below(fn):
    return _NullAlwaysBelow(fn).run()


class _GlobalWithoutNull(_Tracer):
    def LOAD_GLOBAL(self, inst):
        self.stack.append(self.fn.__globals__[inst.argval])


def bytecode_to_fx_global_without_null(fn):
    return _GlobalWithoutNull(fn).run()


class _EveryAttributeIsMethod(_Tracer):
    def loads_method(self, inst):
        return True


def bytecode_to_fx_every_attribute_a_method(fn):
    return _EveryAttributeIsMethod(fn).run()


class _Python311Opcodes(_Tracer):
    def loads_method(self, inst):
        return False                                      # 3.11: methods come from LOAD_METHOD


def bytecode_to_fx_python311_opcodes(fn):
    return _Python311Opcodes(fn).run()


class _MethodFlagOnEveryVersion(_Tracer):
    def loads_method(self, inst):
        return bool(inst.arg & 1)                         # on 3.11 the argument is only the name's index


def bytecode_to_fx_method_flag_on_every_version(fn):
    return _MethodFlagOnEveryVersion(fn).run()


class _MethodFlagAsPrefix(_Tracer):
    def loads_method(self, inst):
        return inst.argrepr.startswith("NULL|self")       # 3.12's display; 3.13 prints it after the name


def bytecode_to_fx_method_flag_as_prefix(fn):
    return _MethodFlagAsPrefix(fn).run()


def bytecode_to_fx_by_version_layout(fn):
    """None as NULL, a match statement, and each version's documented CALL layout."""
    code, graph, null_after = fn.__code__, fx.Graph(), sys.version_info >= (3, 13)
    local_vars = {name: graph.placeholder(name) for name in code.co_varnames[:code.co_argcount]}
    binary = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "@": operator.matmul}
    stack, names = [], ()

    def push_with_null(value):
        stack.extend([value, None] if null_after else [None, value])

    def record(target, args, kwargs):
        if isinstance(target, str):
            return graph.call_method(target, tuple(args), kwargs)
        if any(isinstance(v, fx.Node) for v in list(args) + list(kwargs.values())):
            return graph.call_function(target, tuple(args), kwargs)
        return target(*args, **kwargs)

    for inst in dis.get_instructions(fn):
        match inst.opname:
            case "RESUME" | "PRECALL":
                pass
            case "LOAD_FAST":
                stack.append(local_vars[inst.argval])
            case "LOAD_FAST_LOAD_FAST":
                stack.extend(local_vars[name] for name in inst.argval)
            case "STORE_FAST":
                local_vars[inst.argval] = stack.pop()
            case "LOAD_CONST":
                stack.append(inst.argval)
            case "LOAD_GLOBAL" if inst.arg & 1:
                push_with_null(fn.__globals__[inst.argval])
            case "LOAD_GLOBAL":
                stack.append(fn.__globals__[inst.argval])
            case "PUSH_NULL":
                stack.append(None)
            case "LOAD_METHOD" | "LOAD_ATTR" if inst.opname == "LOAD_METHOD" or (
                    sys.version_info >= (3, 12) and inst.arg & 1):
                owner = stack.pop()
                if isinstance(owner, fx.Node):
                    stack.extend([inst.argval, owner])   # a str: the method's name
                else:
                    push_with_null(getattr(owner, inst.argval))
            case "LOAD_ATTR":
                stack.append(getattr(stack.pop(), inst.argval))
            case "KW_NAMES":
                names = code.co_consts[inst.arg]
            case "CALL" | "CALL_KW":
                if inst.opname == "CALL_KW":
                    names = stack.pop()
                args = stack[len(stack) - inst.arg:]
                del stack[len(stack) - inst.arg:]
                second, first = stack.pop(), stack.pop()
                if null_after:                          # callable, self or NULL, args
                    target, self_arg = first, second
                else:                                   # NULL or method, callable or self, args
                    target, self_arg = (second, None) if first is None else (first, second)
                if self_arg is not None:
                    args = [self_arg] + args
                keywords = dict(zip(names, args[len(args) - len(names):]))
                stack.append(record(target, args[:len(args) - len(names)], keywords))
                names = ()
            case "BINARY_OP":
                right = stack.pop()
                stack.append(record(binary[inst.argrepr], [stack.pop(), right], {}))
            case "UNARY_NEGATIVE":
                stack.append(record(operator.neg, [stack.pop()], {}))
            case "RETURN_VALUE":
                graph.output(stack.pop())
                break
            case other:
                raise RuntimeError(f"unsupported instruction {other}")
    return fx.GraphModule(torch.nn.Module(), graph)


def bytecode_to_fx_unbound_tensor_methods(fn):
    """A Tensor method recorded as call_function(torch.Tensor.<name>), a deque as the stack."""
    from collections import deque

    graph = fx.Graph()
    code = fn.__code__
    slots = {name: graph.placeholder(name) for name in code.co_varnames[:code.co_argcount]}
    stack, null, kw = deque(), object(), ()
    null_after = sys.version_info >= (3, 13)
    binops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "@": operator.matmul}

    def apply(function, args, kwargs):
        if any(isinstance(v, fx.Node) for v in [*args, *kwargs.values()]):
            return graph.call_function(function, tuple(args), dict(kwargs))
        return function(*args, **kwargs)

    for inst in dis.get_instructions(fn):
        op = inst.opname
        if op in ("RESUME", "PRECALL"):
            continue
        if op == "LOAD_FAST":
            stack.append(slots[inst.argval])
        elif op == "LOAD_FAST_LOAD_FAST":
            stack.extend(slots[name] for name in inst.argval)
        elif op == "STORE_FAST":
            slots[inst.argval] = stack.pop()
        elif op == "LOAD_CONST":
            stack.append(inst.argval)
        elif op == "LOAD_GLOBAL":
            value = fn.__globals__[inst.argval]
            stack.extend(((value, null) if null_after else (null, value)) if inst.arg & 1 else (value,))
        elif op == "PUSH_NULL":
            stack.append(null)
        elif op in ("LOAD_METHOD", "LOAD_ATTR"):
            is_method = op == "LOAD_METHOD" or (sys.version_info >= (3, 12) and inst.arg & 1)
            owner = stack.pop()
            if not is_method:
                stack.append(getattr(owner, inst.argval))
            elif isinstance(owner, fx.Node):
                stack.extend((getattr(torch.Tensor, inst.argval), owner))    # the unbound method, its self
            else:
                value = getattr(owner, inst.argval)
                stack.extend((value, null) if null_after else (null, value))
        elif op == "KW_NAMES":
            kw = code.co_consts[inst.arg]
        elif op in ("CALL", "CALL_KW"):
            if op == "CALL_KW":
                kw = stack.pop()
            values = [stack.pop() for _ in range(inst.arg)][::-1]
            upper, lower = stack.pop(), stack.pop()
            if upper is null:
                function, args = lower, values
            elif lower is null:
                function, args = upper, values
            else:
                function, args = lower, [upper] + values
            split = len(args) - len(kw)
            stack.append(apply(function, args[:split], dict(zip(kw, args[split:]))))
            kw = ()
        elif op == "BINARY_OP":
            right, left = stack.pop(), stack.pop()
            stack.append(apply(binops[inst.argrepr], (left, right), {}))
        elif op == "UNARY_NEGATIVE":
            stack.append(apply(operator.neg, (stack.pop(),), {}))
        elif op == "RETURN_VALUE":
            graph.output(stack.pop())
            return fx.GraphModule(torch.nn.Module(), graph)
        else:
            raise RuntimeError("unsupported: " + op)
    raise RuntimeError("function did not return")


def bytecode_to_fx_with_proxies(fn):
    """The stack holds fx.Proxy objects: Python's own operator and method dispatch records the nodes."""
    from torch.fx.proxy import GraphAppendingTracer, Proxy

    graph = fx.Graph()
    tracer = GraphAppendingTracer(graph)
    code = fn.__code__
    env = {name: tracer.create_proxy("placeholder", name, (), {}) for name in code.co_varnames[:code.co_argcount]}
    null, null_after = object(), sys.version_info >= (3, 13)
    stack, pending_kw = [], ()
    binops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "@": operator.matmul}

    def null_pair(value):
        stack.extend((value, null) if null_after else (null, value))

    def call(count, names):
        values = stack[len(stack) - count:]
        del stack[len(stack) - count:]
        upper, lower = stack.pop(), stack.pop()
        callee = upper if lower is null else lower    # a bound method already carries its self
        split = len(values) - len(names)
        return callee(*values[:split], **dict(zip(names, values[split:])))

    for inst in dis.Bytecode(fn):
        op = inst.opname
        if op in ("RESUME", "PRECALL"):
            pass
        elif op == "LOAD_FAST":
            stack.append(env[inst.argval])
        elif op == "LOAD_FAST_LOAD_FAST":
            stack += [env[name] for name in inst.argval]
        elif op == "STORE_FAST":
            env[inst.argval] = stack.pop()
        elif op == "LOAD_CONST":
            stack.append(inst.argval)
        elif op == "LOAD_GLOBAL":
            value = fn.__globals__[inst.argval]
            null_pair(value) if inst.arg & 1 else stack.append(value)
        elif op == "PUSH_NULL":
            stack.append(null)
        elif op == "LOAD_METHOD" or (op == "LOAD_ATTR" and sys.version_info >= (3, 12) and inst.arg & 1):
            owner = stack.pop()
            if isinstance(owner, Proxy):
                stack += [getattr(owner, inst.argval), owner]      # (bound method, self)
            else:
                null_pair(getattr(owner, inst.argval))
        elif op == "LOAD_ATTR":
            stack.append(getattr(stack.pop(), inst.argval))
        elif op == "KW_NAMES":
            pending_kw = code.co_consts[inst.arg]
        elif op in ("CALL", "CALL_KW"):
            if op == "CALL_KW":
                pending_kw = stack.pop()
            stack.append(call(inst.arg, pending_kw))
            pending_kw = ()
        elif op == "BINARY_OP":
            right, left = stack.pop(), stack.pop()
            stack.append(binops[inst.argrepr](left, right))
        elif op == "UNARY_NEGATIVE":
            stack.append(-stack.pop())
        elif op == "RETURN_VALUE":
            result = stack.pop()
            graph.output(result.node if isinstance(result, Proxy) else result)
            return fx.GraphModule(torch.nn.Module(), graph)
        else:
            raise RuntimeError(f"graph break: {op}")
    raise RuntimeError("no RETURN_VALUE")


# --- 05.guard_predictor ---------------------------------------------------------------

class _GuardCache:
    """A right model of scale_shift's cache entries; each wrong predictor below overrides
    the rule it gets wrong."""

    def __init__(self, dynamic):
        self.dynamic, self.entries, self.first, self.changed = dynamic, [], None, set()

    def predict(self, calls):
        return [self.compiles(call) for call in calls]

    def compiles(self, call):
        if any(self.accepts(entry, fields, call) for entry, fields in self.entries) or self.full():
            return False
        self.first = self.first or call
        self.entries.append((dict(call), self.dynamic_fields(call)))
        return True

    def full(self):
        return len(self.entries) >= torch._dynamo.config.recompile_limit

    def accepts(self, entry, dynamic_fields, call):
        return all(self.field_accepts(key, entry[key], call[key], key in dynamic_fields) for key in call)

    def field_accepts(self, key, compiled, value, dynamic):
        if dynamic:
            return key != "size" or value >= 2
        return compiled == value

    def dynamic_fields(self, call):
        if self.dynamic is None:
            self.changed |= {key for key in ("size", "n") if call[key] != self.first[key]}
        return {key for key in self.changed if not (key == "size" and call["size"] < 2)}


class _TensorsOnly(_GuardCache):
    def field_accepts(self, key, compiled, value, dynamic):
        return key in ("n", "flag") or super().field_accepts(key, compiled, value, dynamic)


def predict_recompiles_tensors_only(calls, dynamic):
    return _TensorsOnly(dynamic).predict(calls)


class _IntIsGraphInput(_GuardCache):
    def field_accepts(self, key, compiled, value, dynamic):
        return key == "n" or super().field_accepts(key, compiled, value, dynamic)


def predict_recompiles_int_is_graph_input(calls, dynamic):
    return _IntIsGraphInput(dynamic).predict(calls)


class _ShapeOnly(_GuardCache):
    def field_accepts(self, key, compiled, value, dynamic):
        return key != "size" or super().field_accepts(key, compiled, value, dynamic)


def predict_recompiles_shape_only(calls, dynamic):
    return _ShapeOnly(dynamic).predict(calls)


class _NotSticky(_GuardCache):
    def dynamic_fields(self, call):
        if self.dynamic is not None:
            return set()
        return {key for key in ("size", "n") if call[key] != self.first[key] and not (key == "size" and call["size"] < 2)}


def predict_recompiles_forgets_dynamic(calls, dynamic):
    return _NotSticky(dynamic).predict(calls)


class _DynamicFromTheStart(_GuardCache):
    def dynamic_fields(self, call):
        if self.dynamic is not None:
            return set()
        return {"n"} | ({"size"} if call["size"] >= 2 else set())


def predict_recompiles_dynamic_from_the_start(calls, dynamic):
    return _DynamicFromTheStart(dynamic).predict(calls)


class _NoZeroOneSpecialisation(_GuardCache):
    def field_accepts(self, key, compiled, value, dynamic):
        return dynamic or compiled == value

    def dynamic_fields(self, call):
        if self.dynamic is None:
            self.changed |= {key for key in ("size", "n") if call[key] != self.first[key]}
        return set(self.changed)


def predict_recompiles_size_one_is_dynamic(calls, dynamic):
    return _NoZeroOneSpecialisation(dynamic).predict(calls)


class _NoRecompileLimit(_GuardCache):
    def full(self):
        return False


def predict_recompiles_without_limit(calls, dynamic):
    return _NoRecompileLimit(dynamic).predict(calls)


class _LimitCountsRecompiles(_GuardCache):
    def full(self):
        return len(self.entries) > torch._dynamo.config.recompile_limit


def predict_recompiles_limit_counts_recompiles(calls, dynamic):
    return _LimitCountsRecompiles(dynamic).predict(calls)


class _LimitIsEight(_GuardCache):
    def full(self):
        return len(self.entries) >= 8


def predict_recompiles_limit_always_eight(calls, dynamic):
    return _LimitIsEight(dynamic).predict(calls)


class _ChangedSincePreviousCompile(_GuardCache):
    def dynamic_fields(self, call):
        previous = self.entries[-1][0] if self.entries else call
        if self.dynamic is not None:
            return set()
        return {key for key in ("size", "n") if call[key] != previous[key] and not (key == "size" and call["size"] < 2)}


def predict_recompiles_changed_since_previous_compile(calls, dynamic):
    return _ChangedSincePreviousCompile(dynamic).predict(calls)


class _SizeOneIsNoChange(_GuardCache):
    def dynamic_fields(self, call):
        if self.dynamic is None:
            self.changed |= {key for key in ("size", "n")
                             if call[key] != self.first[key] and not (key == "size" and call["size"] < 2)}
        return {key for key in self.changed if not (key == "size" and call["size"] < 2)}


def predict_recompiles_size_one_is_no_change(calls, dynamic):
    return _SizeOneIsNoChange(dynamic).predict(calls)


class _StaticMeansAutomatic(_GuardCache):
    def __init__(self, dynamic):
        super().__init__(None)


def predict_recompiles_false_is_automatic(calls, dynamic):
    return _StaticMeansAutomatic(dynamic).predict(calls)


class _OneEntry(_GuardCache):
    def compiles(self, call):
        compiled = super().compiles(call)
        if compiled:
            del self.entries[:-1]                            # the new graph replaces the old one
        return compiled


def predict_recompiles_newest_entry_only(calls, dynamic):
    return _OneEntry(dynamic).predict(calls)


class _GradUnguarded(_GuardCache):
    def field_accepts(self, key, compiled, value, dynamic):
        return key == "requires_grad" or super().field_accepts(key, compiled, value, dynamic)


def predict_recompiles_requires_grad_unguarded(calls, dynamic):
    return _GradUnguarded(dynamic).predict(calls)


_AUTO_DYNAMIC = "auto-dynamic"


def predict_recompiles_frame_state(calls, dynamic):
    """Dynamo's own bookkeeping: a frame state per field (its first value, or auto-dynamic
    once a second value is compiled) and each entry as a list of guard functions."""
    frame_state, guards, compiled = {}, [], []
    for call in calls:
        if any(all(guard(call) for guard in entry) for entry in guards) or \
                len(guards) >= torch._dynamo.config.recompile_limit:
            compiled.append(False)
            continue
        entry = []
        for key, value in call.items():
            if dynamic is None and key in ("size", "n"):
                if frame_state.setdefault(key, value) != value:
                    frame_state[key] = _AUTO_DYNAMIC
            if frame_state.get(key) == _AUTO_DYNAMIC and not (key == "size" and value < 2):
                entry.append((lambda key: lambda c: key != "size" or c[key] >= 2)(key))
            else:
                entry.append((lambda key, value: lambda c: c[key] == value)(key, value))
        guards.append(entry)
        compiled.append(True)
    return compiled


def predict_recompiles_distinct_values(calls, dynamic):
    """Entries as tuples with None for a dynamic field; a field is dynamic once two distinct
    values of it were compiled."""
    fields = ("size", "n", "flag", "dtype", "requires_grad")
    seen = {"size": set(), "n": set()}
    entries, compiled = [], []
    for call in calls:
        values = tuple(call[f] for f in fields)
        hit = any(all(e is None and (f != "size" or v >= 2) or e == v for f, e, v in zip(fields, entry, values))
                  for entry in entries)
        if hit or len(entries) >= torch._dynamo.config.recompile_limit:
            compiled.append(False)
            continue
        for field in seen:
            seen[field].add(call[field])
        dynamic_fields = {f for f in seen if dynamic is None and len(seen[f]) > 1} - ({"size"} if call["size"] < 2 else set())
        entries.append(tuple(None if f in dynamic_fields else v for f, v in zip(fields, values)))
        compiled.append(True)
    return compiled


def predict_recompiles_value_sets(calls, dynamic):
    """Entries as (static key, accepted sizes, accepted n) with sets of accepted values."""
    all_sizes = range(2, 1 << 20)                  # what a dynamic size accepts (0/1 are specialised)
    keys = ("flag", "dtype", "requires_grad")
    entries, became_dynamic, origin = [], set(), None
    result = [False] * len(calls)
    for index, call in enumerate(calls):
        key = tuple(call[k] for k in keys)
        matched = any(entry_key == key and call["size"] in sizes and (ns is None or call["n"] in ns)
                      for entry_key, sizes, ns in entries)
        if matched or len(entries) == torch._dynamo.config.recompile_limit:
            continue
        result[index] = True
        origin = origin or (call["size"], call["n"])
        if dynamic is None:
            became_dynamic |= {f for f, first in zip(("size", "n"), origin) if call[f] != first}
        sizes = all_sizes if "size" in became_dynamic and call["size"] > 1 else frozenset([call["size"]])
        ns = None if "n" in became_dynamic else frozenset([call["n"]])
        entries.append((key, sizes, ns))
    return result


# --- 05.aten_histogram --------------------------------------------------------------------

def _call_function_counts(gm) -> dict:
    return dict(Counter(str(node.target) for node in gm.graph.nodes if node.op == "call_function"))


def aten_histogram_backend_dynamo_level(report):
    """Counts the graph Dynamo hands the backend, as chapter 01's recorder did."""
    def backend(gm, example_inputs):
        report.append(dict(Counter(node.target if node.op == "call_method" else node.target.__name__
                                   for node in gm.graph.nodes if node.op in ("call_function", "call_method"))))
        return gm.forward
    return backend


def aten_histogram_backend_one_for_the_function(report):
    """Adds every graph's ops into one histogram for the whole function."""
    def count(gm, example_inputs):
        if not report:
            report.append({})
        for name, number in _call_function_counts(gm).items():
            report[0][name] = report[0].get(name, 0) + number
        return gm.forward
    return aot_autograd(fw_compiler=count)


def aten_histogram_backend_every_node(report):
    """Counts placeholders and the output as ops too."""
    def count(gm, example_inputs):
        report.append(dict(Counter(str(node.target) for node in gm.graph.nodes)))
        return gm.forward
    return aot_autograd(fw_compiler=count)


def aten_histogram_backend_at_each_run(report):
    """Notes the histogram each time the compiled graph runs, not once when it is compiled."""
    def count(gm, example_inputs):
        def run(*args):
            report.append(_call_function_counts(gm))
            return gm(*args)
        return run
    return aot_autograd(fw_compiler=count)


def aten_histogram_backend_core_aten(report):
    """Asks AOTAutograd for the Core ATen decompositions, as if that were the default."""
    from torch._decomp import core_aten_decompositions

    def count(gm, example_inputs):
        report.append(_call_function_counts(gm))
        return gm.forward
    return aot_autograd(fw_compiler=count, decompositions=core_aten_decompositions())


def aten_histogram_backend_make_fx(report):
    """Traces Dynamo's graph to ATen with make_fx on the example inputs, runs Dynamo's graph."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def backend(gm, example_inputs):
        report.append(_call_function_counts(make_fx(gm)(*example_inputs)))
        return gm.forward
    return backend


# --- 05.guard_generator -------------------------------------------------------------------

class _GuardView:
    """A right guard generator: equal views of the read arguments = the entry accepts. Each
    wrong generator below overrides the rule it gets wrong."""

    READ = ("x", "y", "alpha", "mode", "shifts")

    def __init__(self, example):
        self.expected = {name: self.view(name, example[name]) for name in self.READ}

    def accepts(self, call):
        return all(self.view(name, call[name]) == view for name, view in self.expected.items())

    def view(self, name, value):
        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if isinstance(value, (list, tuple)):
            return self.sequence(name, value)
        return self.constant(name, value)

    def tensor(self, value):
        return (value.dtype, tuple(value.shape), value.stride(), value.requires_grad)

    def sequence(self, name, value):
        return type(value), tuple(self.view(name, item) for item in value)

    def constant(self, name, value):
        return type(value), value


class _ShapeAndDtype(_GuardView):
    def tensor(self, value):
        return value.dtype, tuple(value.shape)


def build_guard_shape_and_dtype_only(example):
    return _ShapeAndDtype(example).accepts


class _EveryArgument(_GuardView):
    READ = ("x", "y", "alpha", "mode", "shifts", "note")


def build_guard_every_argument(example):
    return _EveryArgument(example).accepts


class _TensorValues(_GuardView):
    def tensor(self, value):
        return super().tensor(value), tuple(value.detach().flatten().tolist())


def build_guard_tensor_values(example):
    return _TensorValues(example).accepts


class _BranchOutcome(_GuardView):
    def constant(self, name, value):
        return (name, value == "relu") if name == "mode" else super().constant(name, value)


def build_guard_branch_outcome(example):
    return _BranchOutcome(example).accepts


class _ListLength(_GuardView):
    def sequence(self, name, value):
        return type(value), len(value)


def build_guard_list_length_only(example):
    return _ListLength(example).accepts


class _ValueNotType(_GuardView):
    def sequence(self, name, value):
        return tuple(self.view(name, item) for item in value)

    def constant(self, name, value):
        return value


def build_guard_values_not_types(example):
    return _ValueNotType(example).accepts


class _OptionalByNone(_GuardView):
    def view(self, name, value):
        return value is None if name == "y" else super().view(name, value)


def build_guard_optional_by_none(example):
    return _OptionalByNone(example).accepts


def build_guard_source_predicates(example):
    """One (source, predicate) pair per guard, built by walking the example like GuardBuilder."""
    guards = []

    def add(source, value):
        if isinstance(value, torch.Tensor):
            meta = (value.dtype, value.shape, value.stride(), value.requires_grad)
            guards.append((source, lambda v: isinstance(v, torch.Tensor) and
                           (v.dtype, v.shape, v.stride(), v.requires_grad) == meta))
        elif value is None:
            guards.append((source, lambda v: v is None))
        elif isinstance(value, (list, tuple)):
            kind, length = type(value), len(value)
            guards.append((source, lambda v: type(v) is kind and len(v) == length))
            for index, item in enumerate(value):
                add(source + (index,), item)
        else:
            guards.append((source, lambda v, kind=type(value): type(v) is kind and v == value))

    def read(call, source):
        value = call[source[0]]
        for index in source[1:]:
            value = value[index]
        return value

    for name in ("x", "y", "alpha", "mode", "shifts"):
        add((name,), example[name])
    return lambda call: all(check(read(call, source)) for source, check in guards)


# --- 05.recompile_storm -------------------------------------------------------------------

def storm_free_dynamic_true(fn, backend):
    """``dynamic=True``: every size and number symbolic from the start."""
    return torch.compile(fn, backend=backend, dynamic=True)


def storm_free_default(fn, backend):
    """The default ``dynamic=None``: automatic dynamic settles the storm by itself."""
    return torch.compile(fn, backend=backend)


def storm_free_mark_dynamic(fn, backend):
    """Marks the batch dimension dynamic; the Python float stays as it is."""
    compiled = torch.compile(fn, backend=backend)

    def run(x, w, scale):
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x, w, scale)
    return run


def storm_free_mark_dynamic_tensor_scale(fn, backend):
    """Marks the batch dimension dynamic and passes the scale as a tensor; a batch of 1 still specialises."""
    compiled = torch.compile(fn, backend=backend)

    def run(x, w, scale):
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x, w, torch.tensor(scale))
    return run


def storm_free_unbacked_float_scale(fn, backend):
    """An unbacked batch dimension; the Python float is left to automatic dynamic."""
    compiled = torch.compile(fn, backend=backend)

    def run(x, w, scale):
        torch._dynamo.decorators.mark_unbacked(x, 0)
        return compiled(x, w, scale)
    return run


def storm_free_eager_on_recompile(fn, backend):
    """Compiles on the first call, then refuses to recompile: misses run in Python."""
    compiled = torch.compile(fn, backend=backend)
    calls = []

    def run(x, w, scale):
        calls.append(None)
        if len(calls) == 1:
            return compiled(x, w, scale)
        with torch.compiler.set_stance("eager_on_recompile"):
            return compiled(x, w, scale)
    return run


def storm_free_size_oblivious(fn, backend):
    """A dynamic batch dimension under backed_size_oblivious (no 0/1 specialisation), the
    scale as a tensor of x's dtype."""
    import torch.fx.experimental._config as fx_config

    compiled = torch.compile(fn, backend=backend)

    def run(x, w, scale):
        torch._dynamo.mark_dynamic(x, 0)
        with fx_config.patch(backed_size_oblivious=True):
            return compiled(x, w, x.new_tensor(scale))
    return run


WRONG_ANSWERS = [
    ("05.bytecode_tracer", bytecode_to_fx_swapped_operands,
     "BINARY_OP pops the left operand first (the top of the stack is the right operand)"),
    ("05.bytecode_tracer", bytecode_to_fx_every_local,
     "every name in co_varnames is an input (locals come after the co_argcount arguments)"),
    ("05.bytecode_tracer", bytecode_to_fx_graph_value_first,
     "a graph value must be call_function's first argument, so a constant left operand is moved right"),
    ("05.bytecode_tracer", bytecode_to_fx_without_constant_folding,
     "every call and operator becomes a graph node, even one on constants only (no constant folding)"),
    ("05.bytecode_tracer", bytecode_to_fx_torch_function_folds_constants,
     "the torch function recorded for an operator also folds constants (torch.div(3.14, 4) needs a tensor)"),
    ("05.bytecode_tracer", bytecode_to_fx_keywords_as_positional,
     "keyword arguments can be passed positionally (their names, KW_NAMES or CALL_KW's tuple, are dropped)"),
    ("05.bytecode_tracer", bytecode_to_fx_keyword_names_kept,
     "keyword names (KW_NAMES, CALL_KW's tuple) stay set after the call, so a later positional call gets them too"),
    ("05.bytecode_tracer", bytecode_to_fx_negation_as_zero_minus,
     "-a is the subtraction 0 - a (UNARY_NEGATIVE is its own operator, neg)"),
    ("05.bytecode_tracer", bytecode_to_fx_global_without_null,
     "LOAD_GLOBAL pushes only the global (its low bit also pushes NULL for a call)"),
    ("05.bytecode_tracer", bytecode_to_fx_every_attribute_a_method,
     "every LOAD_ATTR loads a method and pushes NULL (only the method flag does)"),
    *([("05.bytecode_tracer", bytecode_to_fx_method_flag_on_every_version,
        "LOAD_ATTR's low bit marks a method load on 3.11 too (there the argument is only the name's index)")]
      if sys.version_info < (3, 12) else []),
    *([("05.bytecode_tracer", bytecode_to_fx_python311_opcodes,
        "Python 3.11's opcodes on 3.12+: LOAD_ATTR is always a plain attribute, methods come from LOAD_METHOD")]
      if sys.version_info >= (3, 12) else []),
    *([("05.bytecode_tracer", bytecode_to_fx_method_flag_as_prefix,
        "Python 3.12's display on 3.13: a method load's argrepr starts with 'NULL|self'")]
      if sys.version_info >= (3, 13) else []),
    *([("05.bytecode_tracer", bytecode_to_fx_null_always_below,
        "NULL always sits below the callable, as on 3.11/3.12 (3.13's PUSH_NULL puts it above)")]
      if sys.version_info >= (3, 13) else []),
    ("05.aten_histogram", aten_histogram_backend_dynamo_level,
     "the graph Dynamo hands a backend is already ATen (it holds torch functions and methods)"),
    ("05.aten_histogram", aten_histogram_backend_one_for_the_function,
     "a backend sees the whole function as one graph (each graph break starts a new graph)"),
    ("05.aten_histogram", aten_histogram_backend_every_node,
     "every node of the ATen graph is an op (placeholders and the output are not)"),
    ("05.aten_histogram", aten_histogram_backend_at_each_run,
     "the backend sees a graph each time it runs (it sees it once, when it is compiled)"),
    ("05.aten_histogram", aten_histogram_backend_core_aten,
     "AOTAutograd decomposes to Core ATen by default (only a compiler that asks for it gets it)"),
    ("05.guard_generator", build_guard_shape_and_dtype_only,
     "a tensor's guard checks its shape and dtype only (strides and requires_grad too)"),
    ("05.guard_generator", build_guard_every_argument,
     "every argument of the frame is guarded (only what the trace read)"),
    ("05.guard_generator", build_guard_tensor_values,
     "a tensor's values are guarded (only its metadata: the values are graph inputs)"),
    ("05.guard_generator", build_guard_branch_outcome,
     "a string compared in an if is guarded by the branch it took (by its value)"),
    ("05.guard_generator", build_guard_list_length_only,
     "a list is guarded by its length only (its elements were baked into the graph too)"),
    ("05.guard_generator", build_guard_values_not_types,
     "a constant is guarded by == alone, so 2.0 passes for 2 and a tuple for a list (the type is checked too)"),
    ("05.guard_generator", build_guard_optional_by_none,
     "an optional tensor is guarded by being None or not (a tensor gets its own tensor guard)"),
    ("05.guard_predictor", predict_recompiles_tensors_only,
     "Dynamo guards only tensors: the Python int n and bool flag never recompile"),
    ("05.guard_predictor", predict_recompiles_shape_only,
     "only the shape is guarded: ints, bools, dtypes and requires_grad never recompile"),
    ("05.guard_predictor", predict_recompiles_int_is_graph_input,
     "a Python int becomes a graph input like a tensor: a new n never recompiles (flag is still guarded)"),
    ("05.guard_predictor", predict_recompiles_forgets_dynamic,
     "automatic dynamic is not sticky: an entry compiled with the first size again is static in it"),
    ("05.guard_predictor", predict_recompiles_dynamic_from_the_start,
     "dynamic=None makes sizes and ints dynamic from the first compile, like dynamic=True"),
    ("05.guard_predictor", predict_recompiles_size_one_is_dynamic,
     "a dynamic size accepts any value, size 1 included (0/1 specialisation forgotten)"),
    ("05.guard_predictor", predict_recompiles_without_limit,
     "there is no recompile limit: every guard failure compiles a new entry"),
    ("05.guard_predictor", predict_recompiles_false_is_automatic,
     "dynamic=False only forbids dynamic=True's symbols; automatic dynamic still applies"),
    ("05.guard_predictor", predict_recompiles_changed_since_previous_compile,
     "automatic dynamic compares with the previous compile's value, not the first compile's (and is not sticky)"),
    ("05.guard_predictor", predict_recompiles_size_one_is_no_change,
     "a compile at size 1 (static 1, 0/1 specialisation) does not count as size having changed"),
    ("05.guard_predictor", predict_recompiles_limit_counts_recompiles,
     "recompile_limit counts recompiles after the first compile, so limit + 1 entries are allowed"),
    ("05.guard_predictor", predict_recompiles_limit_always_eight,
     "the recompile limit is the default 8 (not read from torch._dynamo.config when called)"),
    ("05.guard_predictor", predict_recompiles_newest_entry_only,
     "a recompile replaces the cached graph: only the newest entry is checked"),
    ("05.guard_predictor", predict_recompiles_requires_grad_unguarded,
     "the tensor guard checks shape and dtype, not requires_grad"),
    ("05.recompile_storm", storm_free_dynamic_true,
     "dynamic=True makes every call fit one graph (duck sizing and 0/1 specialisation still recompile)"),
    ("05.recompile_storm", storm_free_default,
     "automatic dynamic settles the storm by itself (static first, then a recompile per new kind of miss)"),
    ("05.recompile_storm", storm_free_mark_dynamic,
     "marking the batch dimension dynamic is the whole fix (the Python float is guarded by value too)"),
    ("05.recompile_storm", storm_free_mark_dynamic_tensor_scale,
     "mark_dynamic covers every batch size (a batch of 1 is still specialised)"),
    ("05.recompile_storm", storm_free_unbacked_float_scale,
     "a Python float becomes a graph input like a tensor (it is specialised first, then made dynamic)"),
    ("05.recompile_storm", storm_free_eager_on_recompile,
     "refusing to recompile cures the storm (the misses then run in Python, not in the graph)"),
]

RIGHT_ANSWERS = [  # (exercise id, function, how it differs from the reference)
    ("05.bytecode_tracer", bytecode_to_fx_opcode_methods,
     "a class with one method per opcode, torch functions for the operators, NULL found in argrepr"),
    ("05.bytecode_tracer", bytecode_to_fx_by_version_layout,
     "None as NULL, a match statement, each version's documented CALL layout"),
    ("05.bytecode_tracer", bytecode_to_fx_unbound_tensor_methods,
     "Tensor methods recorded as call_function(torch.Tensor.<name>), a deque as the stack"),
    ("05.bytecode_tracer", bytecode_to_fx_with_proxies,
     "fx.Proxy values on the stack: Python's operator and method dispatch records the nodes"),
    ("05.aten_histogram", aten_histogram_backend_make_fx,
     "make_fx traces Dynamo's graph to ATen on the example inputs; Dynamo's graph runs"),
    ("05.guard_generator", build_guard_source_predicates,
     "one (source, predicate) pair per guard, walking the example like GuardBuilder"),
    ("05.guard_predictor", predict_recompiles_frame_state,
     "Dynamo's frame state (first value or auto-dynamic) and entries as lists of guard functions"),
    ("05.guard_predictor", predict_recompiles_distinct_values,
     "entries as tuples with None for dynamic fields; dynamic once two distinct values were compiled"),
    ("05.guard_predictor", predict_recompiles_value_sets,
     "entries hold sets of accepted sizes and n values; the limit compared with =="),
    ("05.recompile_storm", storm_free_size_oblivious,
     "a dynamic batch dimension under backed_size_oblivious, the scale as a tensor of x's dtype"),
]
