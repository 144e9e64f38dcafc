"""Wrong answers that are a reference with one mistake, written as that mistake.

``mutant(reference, name, (old, new), ...)`` is the reference function with each ``old``
text replaced by ``new`` and renamed ``name``: the catalogue states only what differs, and
the rest follows the reference when it changes. Each ``old`` must occur exactly once in
the reference's source, so a reference that changed under a mutation fails at import
instead of silently testing something else. The mutant runs with the reference's globals;
its text is kept in ``linecache``, so ``inspect.getsource`` and tracebacks read it.

Tests also paste a catalogue module into notebooks graded in the sandbox, where the
solutions are hidden: :func:`written_out` gives such a module's source with every mutant
written out as its text, and the references' imports in place of the imports of them.
"""
import ast
import importlib
import inspect
import linecache
import sys


def mutant(reference, name: str, *edits: tuple[str, str]):
    """``reference`` renamed ``name``, each ``(old, new)`` of ``edits`` applied to its source."""
    source = inspect.getsource(reference)
    for old, new in [(f"def {reference.__name__}(", f"def {name}("), *edits]:
        if source.count(old) != 1:
            raise ValueError(f"mutant {name}: {old!r} occurs {source.count(old)} times in "
                             f"{reference.__module__}.{reference.__name__}, not once")
        source = source.replace(old, new)
    filename = f"<mutant {name} of {reference.__module__}.{reference.__name__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {}
    exec(compile(source, filename, "exec"), reference.__globals__, namespace)
    function = namespace[name]
    function.__module__ = sys._getframe(1).f_globals["__name__"]   # the catalogue that declares it
    return function


def written_out(module) -> str:
    """``module``'s source, self-contained: each ``name = mutant(...)`` replaced by the
    mutant's text, each import from ``solutions`` by that module's own imports, the import
    of this module dropped."""
    source = inspect.getsource(module)
    lines = source.splitlines(keepends=True)
    for node in reversed(ast.parse(source).body):
        if isinstance(node, ast.ImportFrom) and node.module == __name__:
            text = ""
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("solutions."):
            text = _imports(importlib.import_module(node.module))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and getattr(node.value.func, "id", None) == mutant.__name__:
            function = getattr(module, node.targets[0].id)
            assert function.__name__ == node.targets[0].id, f"mutant {function.__name__} bound as {node.targets[0].id}"
            text = inspect.getsource(function)
        else:
            continue
        lines[node.lineno - 1:node.end_lineno] = [text]
    return "".join(lines)


def _imports(module) -> str:
    source = inspect.getsource(module)
    return "".join(ast.get_source_segment(source, node) + "\n" for node in ast.parse(source).body
                   if isinstance(node, (ast.Import, ast.ImportFrom)))
