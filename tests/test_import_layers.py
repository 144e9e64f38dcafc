"""The course's import graph stays layered, read from the source with ``ast`` (nothing is imported).

Both kinds of import count: at module level and inside a function (a function-level import
that breaks a circle still leaves the modules knotted). Where a package's docstring lists its
parts bottom-up (toychip's modules, grader's layers), the list is the declaration checked here,
so the docstring and the code cannot drift apart. Imports by name at run time
(``importlib.import_module``) are not seen.
"""
from __future__ import annotations

import ast
import functools
import itertools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The course's packages bottom-up (README, "Layout"): a package imports only packages of
# earlier layers. lib/ is the course library, solutions answer the exercises, grader judges,
# tools/ serve the course (the learner's workspace, the executed edition) and may use all of it.
PACKAGE_LAYERS = (
    ("cxx_toolchain", "benchmarking", "graphviews"),  # stand alone
    ("toychip",),        # the simulated chip; its graph views are drawn by graphviews
    ("course_models",),  # example models that run on the chip
    ("solutions",),      # reference answers, built on the chip
    ("grader",),         # grades answers against the solutions and the models
    ("course_workspace", "course_site"),  # tools of the course
)
# A package's own __init__ and __main__: the front door, above all of its parts.
FRONT_DOOR = "(front door)"


def package_folders() -> dict[str, Path]:
    folders = {path.parent.name: path.parent for folder in ("lib", "tools") for path in (ROOT / folder).glob("*/__init__.py")}
    return folders | {"grader": ROOT / "grader", "solutions": ROOT / "solutions"}


@functools.cache
def module_files() -> dict[str, Path]:
    """Every module of the course's packages by dotted name (a package's __init__ by the package's)."""
    modules = {}
    for package, folder in package_folders().items():
        for path in folder.rglob("*.py"):
            parts = (package, *path.relative_to(folder).with_suffix("").parts)
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_modules(module: str, path: Path) -> set[str]:
    """The course modules that ``module`` imports anywhere in its file."""
    known = module_files()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:package.count(".") + 2 - node.level]
                base = ".".join(anchor + [base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names]  # a submodule, or a name in base
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    return {module: imported_modules(module, path) for module, path in module_files().items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Modules reached from ``start`` through one import or more (``start`` too if on a circle)."""
    seen, todo = set(), list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def circles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The groups of modules that import each other, directly or through others."""
    reach = {module: reachable(graph, module) for module in graph}
    return {frozenset(other for other in reach[module] if module in reach[other])
            for module in graph if module in reach[module]}


def part_of(module: str, package: str) -> str | None:
    """The module or subpackage right below ``package`` that ``module`` is in (None: outside)."""
    if module == package:
        return FRONT_DOOR
    if not module.startswith(package + "."):
        return None
    part = module[len(package) + 1:].split(".")[0]
    return FRONT_DOOR if part == "__main__" else part


def docstring_layers(package: str) -> list[str]:
    """The names a package's docstring lists, one a line, in its first ``::`` block."""
    tree = ast.parse((package_folders()[package] / "__init__.py").read_text())
    lines = ast.get_docstring(tree).split("::\n", 1)[1].lstrip("\n").splitlines()
    return [line.split()[0] for line in itertools.takewhile(lambda line: line.startswith(" "), lines)]


def upward(imports: set[tuple[str, str]], layers) -> set[tuple[str, str]]:
    """The (importer, imported) pairs whose imported side is not in an earlier layer
    (the front door, and anything no layer lists, rank above every layer)."""
    rank = {name: index for index, layer in enumerate(layers) for name in layer}
    return {(a, b) for a, b in imports
            if a != b and rank.get(b, len(layers)) >= rank.get(a, len(layers))}


def test_no_import_circle_among_the_course_s_modules():
    assert not {", ".join(sorted(group)) for group in circles(import_graph())}


def test_every_package_has_a_layer():
    assert set(package_folders()) == {name for layer in PACKAGE_LAYERS for name in layer}


def test_packages_import_only_packages_of_earlier_layers():
    imports = {(a.split(".")[0], b.split(".")[0]) for a, targets in import_graph().items() for b in targets}
    assert upward(imports, PACKAGE_LAYERS) == set()


@pytest.mark.parametrize("package", ["toychip", "grader"])
def test_the_package_docstring_lists_every_part_exactly_once(package):
    listed = docstring_layers(package)
    parts = {part_of(module, package) for module in module_files()} - {None, FRONT_DOOR}
    assert sorted(listed) == sorted(parts)


@pytest.mark.parametrize("package", ["toychip", "grader"])
def test_each_part_imports_only_parts_listed_above_it_in_the_package_docstring(package):
    imports = {(part_of(a, package), part_of(b, package)) for a, targets in import_graph().items()
               for b in targets}
    imports = {(a, b) for a, b in imports if a and b}
    assert upward(imports, [[name] for name in docstring_layers(package)]) == set()
