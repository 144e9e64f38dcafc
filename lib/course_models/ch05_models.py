"""Programs and measurements for chapter 05 (TorchDynamo), shared by the notebook and the grader.

* *Programs as source text*: the grader draws random straight-line tensor programs from a
  seed, has programs with graph breaks, and ships their source (plain data) to the
  sandbox; :func:`load_program` turns the text back into a function there.
* :func:`scale_shift` is the function whose guards chapter 05 predicts and reads;
  :func:`measure_compiles` compiles it and reports which calls compiled.
* ``BATCH_MODELS`` use the batch size in Python (``x.shape[0]``); ``STORM_MODELS`` also
  take a Python float: the recompile-storm exercise.
* :func:`blend` reads a tensor, an optional tensor, a number, a string and a list, and
  ignores one argument: the guard-generator exercise; :func:`make_blend_call` builds its
  arguments from plain data.
* :func:`transformed_code` records what Dynamo put in place of a function's bytecode;
  :func:`dynamo_log` collects what Dynamo logs (warnings, graph-break reasons) as text.

The private ``torch._dynamo`` APIs the chapter's helpers need (``CompileCounter``,
``register_bytecode_hook``) are used here, not spread over the grader; the notebook and the
reference solutions use them openly, because they are what the chapter teaches.
"""
from __future__ import annotations

import contextlib
import inspect
import io
import logging
import random

import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter

__all__ = ["load_program", "STRAIGHT_LINE_PROGRAMS", "random_straight_line", "BREAK_PROGRAMS", "scale_shift",
           "make_call", "measure_compiles", "BATCH_MODELS", "FEATURES", "STORM_MODELS", "blend", "make_blend_call",
           "transformed_code", "quiet_dynamo", "dynamo_log"]


_PROGRAM_FILE = "<program>"  # the file name of every program's code


def load_program(source: str):
    """The one function defined by ``source``; ``torch`` is a global, and the source may
    import more (``from torch import relu``)."""
    namespace: dict = {"torch": torch}
    exec(compile(source, _PROGRAM_FILE, "exec"), namespace)
    functions = [v for v in namespace.values()
                 if inspect.isfunction(v) and v.__code__.co_filename == _PROGRAM_FILE]
    if len(functions) != 1:
        raise ValueError("a program defines exactly one function")
    return functions[0]


# --- straight-line programs (05.bytecode_tracer) ---------------------------------------

STRAIGHT_LINE_PROGRAMS = {
    "affine_relu": '''
def affine_relu(x, w, b):
    y = x @ w + b
    return torch.relu(y) * 0.5
''',
    "normalize": '''
def normalize(x):
    centered = x - x.mean(dim=0, keepdim=True)
    scaled = centered / (torch.sqrt(centered.var()) + 1e-05)
    return torch.clamp(scaled, max=2.0)
''',
    "constants": '''
def constants(x):
    angle = x * (torch.pi / 4)
    return torch.cos(angle) + torch.finfo(torch.float32).eps
''',
    "gated": '''
def gated(x, y):
    gate = torch.sigmoid(x)
    return gate * torch.tanh(y) + (1 - gate) * -y
''',
    "imported": '''
from torch import relu
import torch.nn.functional as F

def imported(x, y):
    h = y * F.silu(x)
    return relu(h) - 0.5
''',
}

# Random programs start with these imports: a call of an imported function pushes NULL
# itself (LOAD_GLOBAL), and an imported module's function is a plain attribute (LOAD_ATTR).
_PROGRAM_IMPORTS = "from torch import tanh\nimport torch.nn.functional as F\n\n"

# (template, number of operands); operands are earlier values, {c} a constant
_LINE_TEMPLATES = [
    ("torch.relu({0})", 1), ("tanh({0})", 1), ("{0}.sigmoid()", 1), ("{0} + {1}", 2),
    ("{0} * {c}", 1), ("{c} - {0}", 1), ("{0} @ {1}", 2), ("{0}.sum(dim=1, keepdim=True) + {0}", 1),
    ("-{0}", 1), ("torch.clamp({0}, min=-1.0, max={c})", 1), ("torch.clamp({0}, max={c})", 1),
    ("{0}.t() * {1}", 2), ("torch.mul({0}, {1})", 2), ("{1} * F.silu({0})", 2), ("{c} / ({0}.abs() + 1.0)", 1),
    ("{0} * (torch.pi / {c})", 1),
]


def random_straight_line(rng: random.Random, name: str, inputs: int = 2, lines: int = 5) -> str:
    """Source of a random straight-line function of ``inputs`` n×n tensors."""
    values = [f"x{i}" for i in range(inputs)]
    body = []
    for index in range(lines):
        template, arity = rng.choice(_LINE_TEMPLATES)
        operands = [rng.choice(values[-3:]) for _ in range(arity)]
        body.append(f"    v{index} = " + template.format(*operands, c=rng.choice([0.5, 2.0, 3.0])))
        values.append(f"v{index}")
    body.append(f"    return {values[-1]}")
    return _PROGRAM_IMPORTS + f"def {name}({', '.join(values[:inputs])}):\n" + "\n".join(body) + "\n"


# --- programs with graph breaks (section 2.4, 05.aten_histogram) ------------------------

BREAK_PROGRAMS = {
    "one_print": '''
def one_print(x):
    y = torch.sin(x) + 1
    print("halfway")
    return y * 2
''',
    "two_breaks": '''
def two_breaks(x):
    a = x * 2
    torch._dynamo.graph_break()
    b = a.relu() + x
    torch._dynamo.graph_break()
    return b.sum()
''',
    "value_branch": '''
def value_branch(x):
    y = x * 2.0
    if y.sum() > 0:
        y = y * 3
    else:
        y = y - 3
    return y + 1
''',
    "no_break": '''
def no_break(x):
    return torch.tanh(x) * 2 - 1
''',
}

@contextlib.contextmanager
def quiet_dynamo():
    """Silence what Dynamo logs on purpose (recompile-limit warnings) and what programs print."""
    log = logging.getLogger("torch._dynamo")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def dynamo_log(*artifacts: str):
    """The messages Dynamo logs inside the block — its warnings, and the ``TORCH_LOGS``
    artifacts named (``"graph_breaks"``) — collected in a list instead of printed to
    stderr, so that a notebook prints the line it discusses as ordinary output.

    ``torch._logging.set_logs`` turns the artifacts on; Dynamo's loggers hand their records
    to the handlers of the ``torch._dynamo`` logger, which the block replaces with its own.
    Leaving the block resets the log settings (``set_logs()``), as the chapter does.
    """
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    torch._logging.set_logs(**{artifact: True for artifact in artifacts})
    dynamo_logger = logging.getLogger("torch._dynamo")
    handlers, dynamo_logger.handlers = dynamo_logger.handlers, [handler]
    try:
        yield messages
    finally:
        dynamo_logger.handlers = handlers
        torch._logging.set_logs()


def transformed_code(fn, *args) -> list:
    """``[(original code, transformed code), ...]`` for every frame Dynamo compiles while
    ``torch.compile(fn, backend="eager")`` runs once on ``args``, in the order compiled."""
    from torch._dynamo.convert_frame import register_bytecode_hook

    pairs = []
    handle = register_bytecode_hook(lambda code, new_code: pairs.append((code, new_code)))
    try:
        torch._dynamo.reset()
        with quiet_dynamo():
            torch.compile(fn, backend="eager")(*args)
    finally:
        handle.remove()
    return pairs


# --- guards (05.guard_predictor) -----------------------------------------------------------

def scale_shift(x, n, flag):
    """What chapter 05's guards protect: a tensor, a Python int and a Python bool."""
    y = x * n
    if flag:
        return torch.relu(y)
    return y - 1


DTYPES = {"float32": torch.float32, "float64": torch.float64}


def make_call(spec: dict) -> tuple:
    """``scale_shift``'s arguments for a call description
    ``{"size": 4, "dtype": "float32", "requires_grad": False, "n": 2, "flag": True}``."""
    x = torch.linspace(-1, 1, spec["size"], dtype=DTYPES[spec["dtype"]])
    return x.requires_grad_(spec["requires_grad"]), spec["n"], spec["flag"]


def measure_compiles(calls: list[dict], dynamic, recompile_limit: int | None = None) -> list[bool]:
    """For each call of ``torch.compile(scale_shift, dynamic=dynamic)`` in order: did Dynamo
    compile? Under ``recompile_limit`` entries when given, else under the configured limit."""
    counter = CompileCounter()
    torch._dynamo.reset()
    compiled = torch.compile(scale_shift, backend=counter, dynamic=dynamic)
    compiles = []
    limit = torch._dynamo.config.recompile_limit if recompile_limit is None else recompile_limit
    with quiet_dynamo(), torch._dynamo.config.patch(recompile_limit=limit):
        try:
            for spec in calls:
                before = counter.frame_count
                compiled(*make_call(spec))
                compiles.append(counter.frame_count > before)
        finally:
            torch._dynamo.reset()
    return compiles


def random_calls(rng: random.Random, count: int, sizes: tuple = (3, 4, 6, 8)) -> list[dict]:
    """Call descriptions that change one thing at a time, mostly: n 2/5/7, one of ``sizes``."""
    spec = {"size": rng.choice(sizes), "dtype": "float32", "requires_grad": False,
            "n": rng.choice([2, 5, 7]), "flag": True}
    calls = [dict(spec)]
    for _ in range(count - 1):
        key = rng.choice(["size", "size", "n", "n", "flag", "dtype", "requires_grad", "same"])
        if key == "size":
            spec["size"] = rng.choice(sizes)
        elif key == "n":
            spec["n"] = rng.choice([2, 5, 7])
        elif key == "flag":
            spec["flag"] = not spec["flag"]
        elif key == "dtype":
            spec["dtype"] = rng.choice(["float32", "float64"])
        elif key == "requires_grad":
            spec["requires_grad"] = not spec["requires_grad"]
        calls.append(dict(spec))
    return calls


# --- dynamic shapes (section 4, 05.recompile_storm) -------------------------------------------

FEATURES = 8  # the feature dimension of every batch model: the batch size may equal it (duck sizing)


def batch_mlp(x, w):
    """A layer, then centring over the batch."""
    h = torch.relu(x @ w)
    return h - h.mean(dim=0)


def batch_positions(x, w):
    """Adds each row's position divided by the batch size: ``x.shape[0]`` as a Python number."""
    positions = torch.arange(x.shape[0], dtype=x.dtype).unsqueeze(1) / x.shape[0]
    return torch.tanh(x @ w) + positions


def batch_halves(x, w):
    """Swaps the two halves of the batch: slicing at ``x.shape[0] // 2``."""
    half = x.shape[0] // 2
    return torch.cat([x[half:], x[:half]]) @ w


BATCH_MODELS = {"batch_mlp": batch_mlp, "batch_positions": batch_positions, "batch_halves": batch_halves}


def storm_mlp(x, w, scale):
    """A layer scaled by a Python float, then centring over the batch."""
    h = torch.tanh(x @ w) * scale
    return h - h.mean(dim=0)


def storm_positions(x, w, scale):
    """Adds each row's position divided by the batch size: ``x.shape[0]`` as a Python number."""
    positions = torch.arange(x.shape[0], dtype=x.dtype).unsqueeze(1) / x.shape[0]
    return torch.relu(x @ w) * scale + positions


def storm_halves(x, w, scale):
    """Swaps the two halves of the batch (slicing at ``x.shape[0] // 2``), then scales."""
    half = x.shape[0] // 2
    return torch.cat([x[half:], x[:half]]) @ w * scale


STORM_MODELS = {"storm_mlp": storm_mlp, "storm_positions": storm_positions, "storm_halves": storm_halves}


# --- one cache entry's guards (05.guard_generator) ---------------------------------------------

def blend(x, y, alpha, mode, shifts, note):
    """What chapter 05's guard generator guards: ``note`` is never read."""
    out = x * alpha
    if y is not None:
        out = out + y
    if mode == "relu":
        out = torch.relu(out)
    for shift in shifts:
        out = out.roll(shift, 0)
    return out


def make_tensor(spec: dict) -> torch.Tensor:
    """A tensor from ``{"shape": [4, 4], "dtype": "float32", "requires_grad": False,
    "transposed": False, "fill": 1.0}``: ``transposed`` gives the same shape with swapped
    strides (a transposed view), ``fill`` scales its values."""
    shape = list(spec["shape"])
    values = torch.linspace(-1, 1, torch.Size(shape).numel(), dtype=DTYPES[spec["dtype"]]) * spec["fill"]
    tensor = values.reshape(shape[::-1]).t() if spec["transposed"] else values.reshape(shape)
    return tensor.requires_grad_(spec["requires_grad"])


def make_blend_call(spec: dict) -> dict:
    """:func:`blend`'s arguments by name, from plain data: tensors as :func:`make_tensor`
    specs (``y`` may be None), the rest as they are."""
    return {**spec, "x": make_tensor(spec["x"]), "y": None if spec["y"] is None else make_tensor(spec["y"])}
