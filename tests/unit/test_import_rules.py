"""The layering rule of docs/architecture.md ("Layers"), checked on the import graph of
``ssan_plugin/`` read statically with ``ast``: every ``import`` and ``from ... import``,
relative ones and those inside functions included (a lazy import is still a dependency), and
every ``importlib.import_module(...)`` / ``__import__(...)`` whose module name is a literal
string (absolute, or relative with a package the reader can tell).

``LAYERS`` below is the doc's picture as data, bottom layer first; change the two together.
A module may import its own layer and the layers below it, never one above; on top of that,
``SEPARATE`` lists packages of one layer that never import each other; no module imports a
script, a benchmark or an example; no import cycle between modules. The self-checks at the end
feed the checker graphs with the arrows this rule was written against and assert each one is
reported.
"""

import ast
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

import pytest
from conftest import ROOT

PACKAGE = "ssan_plugin"

#: (layer, its members), bottom layer first. A member is a module or a package (then every
#: module under it); ``ssan_plugin`` itself stands for the package root's ``__init__.py`` only.
#: The most specific member decides a module's layer.
LAYERS: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("helpers", ("ssan_plugin.errors", "ssan_plugin.cli", "ssan_plugin.runtime", "ssan_plugin.stats")),
    ("maths", ("ssan_plugin.modules",)),
    ("data", ("ssan_plugin.translation", "ssan_plugin.srl", "ssan_plugin.pairs")),
    ("fairseq", ("ssan_plugin.models", "ssan_plugin.criterions", "ssan_plugin.tasks")),
    ("root", ("ssan_plugin",)),
    ("tools", ("ssan_plugin.hub", "ssan_plugin.warm_start", "ssan_plugin.analysis",
               "ssan_plugin.experiments")),
    ("commands", ("ssan_plugin.commands",)),
)

#: Packages of one layer that never import each other (models and criteria meet only through
#: the records of modules/selection.py and shared maths below them).
SEPARATE: Tuple[Tuple[str, str], ...] = (
    ("ssan_plugin.criterions", "ssan_plugin.models"),
    ("ssan_plugin.models", "ssan_plugin.criterions"),
)

#: Top-level names the package must never import: the front ends above it.
FRONT_ENDS = ("scripts", "benchmarks", "examples")

Edge = Tuple[str, str]


# ---------------------------------------------------------------- reading the graph

def package_modules(root: Path = ROOT) -> Dict[str, Path]:
    """{dotted module name: file} of every module of the package (``__init__`` -> package)."""
    modules = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


#: callables that import a module named by a string: ``importlib.import_module(name,
#: package)`` (also imported by its own name) and ``__import__(name, globals, locals, fromlist,
#: level)`` (also as ``builtins.__import__``)
IMPORT_CALLS = ("import_module", "__import__")


def _resolve(anchor: str, level: int, name: str) -> str:
    """``name`` relative to the package ``anchor`` with ``level`` leading dots, as Python
    resolves ``from <level dots><name> import ...``."""
    base = anchor.split(".")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _argument(call: ast.Call, position: int, keyword: str) -> Optional[ast.expr]:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _string(node: Optional[ast.expr]) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def string_import(call: ast.Call, module: str, here: str) -> Optional[Tuple[str, List[str]]]:
    """For a call of one of IMPORT_CALLS with a literal module name: (the absolute name of the
    module it imports, its literal ``fromlist``); None for any other call, a name that is not a
    literal, or a relative name whose package the reader cannot tell. ``here``: the package
    relative imports of ``module`` start from ("" for none)."""
    func = call.func
    if isinstance(func, ast.Name):
        called = func.id
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id in ("importlib", "builtins"):
        called = func.attr
    else:
        return None
    name = _string(_argument(call, 0, "name"))
    if called not in IMPORT_CALLS or name is None:
        return None
    if called == "import_module":
        level = len(name) - len(name.lstrip("."))
        if not level:
            return name, []
        package = _argument(call, 1, "package")
        anchor = _string(package)
        if isinstance(package, ast.Name) and package.id == "__package__":
            anchor = here
        elif isinstance(package, ast.Name) and package.id == "__name__":
            anchor = module
        elif isinstance(package, ast.Attribute) and package.attr == "parent" \
                and isinstance(package.value, ast.Name) and package.value.id == "__spec__":
            anchor = here
        return (_resolve(anchor, level, name[level:]), []) if anchor else None
    level_node = _argument(call, 4, "level")
    level = level_node.value if isinstance(level_node, ast.Constant) \
        and isinstance(level_node.value, int) else 0
    names = _argument(call, 3, "fromlist")
    fromlist = [_string(n) for n in names.elts] \
        if isinstance(names, (ast.List, ast.Tuple)) else []
    fromlist = [n for n in fromlist if n and n != "*"]
    if not level:
        return name, fromlist
    return (_resolve(here, level, name), fromlist) if here else None


def imports_of(source: str, module: str, is_package: bool, known: Iterable[str]) -> Set[str]:
    """Every module of the package that ``source`` (the text of ``module``) imports, anywhere
    in the file. ``from X import name`` points at ``X.name`` when that is a module, else at
    ``X``; so does a call of ``importlib.import_module`` / ``__import__`` with a literal module
    name (``__import__``'s literal ``fromlist`` as ``from``'s names). A target that is not a
    module of the package is returned as it is (the rule then reports it as unknown). Imports of
    other packages are left out."""
    known = set(known)
    here = module if is_package else module.rpartition(".")[0]
    found = set()

    def imported(target: str, names: Iterable[str]) -> None:
        if target.split(".")[0] != PACKAGE:
            return
        names = list(names)
        if not names:
            found.add(target)
        for name in names:
            sub = f"{target}.{name}"
            found.add(sub if sub in known else target)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported(alias.name, [])
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(here, node.level, node.module or "") if node.level \
                else node.module or ""
            imported(target, [alias.name for alias in node.names])
        elif isinstance(node, ast.Call):
            call = string_import(node, module, here)
            if call is not None:
                imported(*call)
    return found


def front_end_imports(source: str, script_names: Set[str]) -> Set[str]:
    """Absolute imports of a front end (``scripts``, ``benchmarks``, ``examples``) or of one of
    their files by its name, by an import statement or by a literal string."""
    hits = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call):  # by a literal string; a relative one is not resolved
            call = string_import(node, "", "")
            names = [call[0]] if call is not None else []
        hits.update(n for n in names
                    if n.split(".")[0] in FRONT_ENDS or n.split(".")[0] in script_names)
    return hits


def import_graph(root: Path = ROOT) -> Set[Edge]:
    modules = package_modules(root)
    edges = set()
    for name, path in modules.items():
        source = path.read_text(encoding="utf-8")
        for target in imports_of(source, name, path.name == "__init__.py", modules):
            edges.add((name, target))
    return edges


# ---------------------------------------------------------------- the rule

def layer_of(module: str) -> Optional[int]:
    """Index in LAYERS of the most specific member covering ``module``; None if none does."""
    best, best_len = None, -1
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            covers = module == member or (member != PACKAGE and module.startswith(member + "."))
            if covers and len(member) > best_len:
                best, best_len = index, len(member)
    return best


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def cycles(edges: Iterable[Edge]) -> List[List[str]]:
    """The import cycles: strongly connected components with more than one module, and
    modules that import themselves (Tarjan, iterative)."""
    graph: Dict[str, List[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return sorted(found)


def violations(edges: Iterable[Edge], modules: Iterable[str]) -> List[str]:
    """One line per broken rule: a module without a layer, an import of something that is
    not a module of the package, an arrow up a layer, an arrow between SEPARATE packages,
    an import cycle."""
    edges = sorted(set(edges))
    known = set(modules)
    problems = [f"{m}: no layer in LAYERS (place it there and in docs/architecture.md)"
                for m in sorted(known) if layer_of(m) is None]
    for a, b in edges:
        if b not in known:
            problems.append(f"{a} -> {b}: not a module of the package")
            continue
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None:
            continue
        if lb > la:
            problems.append(f"{a} -> {b}: up from layer {LAYERS[la][0]!r} to {LAYERS[lb][0]!r}")
        for importer, imported in SEPARATE:
            if _within(a, importer) and _within(b, imported):
                problems.append(f"{a} -> {b}: {importer} never imports {imported}")
    problems += [f"import cycle: {' <-> '.join(c)}" for c in cycles(edges)]
    return problems


# ---------------------------------------------------------------- the package

def test_the_package_keeps_the_layering_rule():
    modules = package_modules()
    assert f"{PACKAGE}.cli" in modules and PACKAGE in modules  # the walk found the package
    problems = violations(import_graph(), modules)
    assert not problems, "\n".join(problems)


def test_the_package_imports_no_script():
    scripts = {p.stem for p in (ROOT / "scripts").glob("*.py")}
    scripts |= {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
    scripts |= {p.stem for p in (ROOT / "examples").rglob("*.py")}
    hits = [f"{name} imports {', '.join(sorted(found))}"
            for name, path in package_modules().items()
            if (found := front_end_imports(path.read_text(encoding="utf-8"), scripts))]
    assert not hits, "\n".join(hits)


def doc_name(member: str, modules: Dict[str, Path]) -> str:
    """How the doc's Layers section names a member: ``models/``, ``cli.py``, ``__init__.py``."""
    if member == PACKAGE:
        return "__init__.py"
    path = member[len(PACKAGE) + 1:].replace(".", "/")
    return f"{path}/" if modules[member].name == "__init__.py" else f"{path}.py"


def test_the_doc_names_every_member_of_every_layer():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    assert "tests/unit/test_import_rules.py" in section  # the doc says what enforces it
    modules = package_modules()
    missing = [doc_name(member, modules) for _, members in LAYERS for member in members
               if doc_name(member, modules) not in section]
    assert not missing, f"in LAYERS but not in the doc's Layers section: {missing}"


# ---------------------------------------------------------------- self-checks

MEASURED = {  # the arrows this rule was written against, each with what must be reported
    "helper imports the root": (("ssan_plugin.cli", "ssan_plugin"), "up from layer 'helpers'"),
    "translator imports the root": (("ssan_plugin.translation.translator", "ssan_plugin"),
                                    "up from layer 'data'"),
    "SRL evaluation imports the task": (("ssan_plugin.srl.evaluate", "ssan_plugin.tasks.srl"),
                                        "up from layer 'data' to 'fairseq'"),
    "criterion imports a model": (("ssan_plugin.criterions.sentence_pair_loss",
                                   "ssan_plugin.models.pair_classifier"),
                                  "ssan_plugin.criterions never imports ssan_plugin.models"),
}


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_the_check_reports_each_bad_arrow(name):
    edge, expected = MEASURED[name]
    modules = package_modules()
    edges = import_graph()
    assert edge not in edges
    reported = [p for p in violations(edges | {edge}, modules) if p.startswith(" -> ".join(edge))]
    assert reported and expected in reported[0], reported


def test_the_check_reports_the_cycle_inside_modules():
    native, attention = "ssan_plugin.modules.native", "ssan_plugin.modules.selective_weights"
    edges = import_graph() | {(native, attention), (attention, native)}
    problems = violations(edges, package_modules())
    assert any(p.startswith("import cycle:") and native in p and attention in p
               for p in problems), problems
    assert cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "e")}) == [
        ["a", "b", "c"], ["e"]]


def test_the_reader_sees_relative_lazy_and_absolute_imports():
    known = {"ssan_plugin", "ssan_plugin.cli", "ssan_plugin.tasks", "ssan_plugin.tasks.srl",
             "ssan_plugin.srl", "ssan_plugin.srl.evaluate", "ssan_plugin.srl.datadir",
             "ssan_plugin.modules", "ssan_plugin.modules.native"}
    source = (
        "import os\n"
        "from . import datadir\n"
        "from ..tasks.srl import SRLTask\n"
        "from .. import modules, seed_groups_not_a_module\n"
        "def f():\n"
        "    import ssan_plugin\n"
        "    from ssan_plugin.modules import native\n"
        "    from fairseq import utils\n"
    )
    assert imports_of(source, "ssan_plugin.srl.evaluate", False, known) == {
        "ssan_plugin.srl.datadir", "ssan_plugin.tasks.srl", "ssan_plugin.modules",
        "ssan_plugin", "ssan_plugin.modules.native"}
    # in a package's __init__, "." is the package itself
    assert imports_of("from .cli import x\n", "ssan_plugin", True, known) == {"ssan_plugin.cli"}
    assert front_end_imports("import scripts.demo\nfrom evaluate_bleu import main\n"
                             "from .probe import x\nfrom benchmarks.bench_ssan import run\n"
                             "import bench_steps\n",
                             {"evaluate_bleu", "probe", "bench_steps"}) == {
        "scripts.demo", "evaluate_bleu", "benchmarks.bench_ssan", "bench_steps"}


STRING_IMPORTS = {  # a call inside a function of ssan_plugin.srl.evaluate: what it imports
    'importlib.import_module("ssan_plugin.tasks.srl")': {"ssan_plugin.tasks.srl"},
    'import_module("ssan_plugin.modules.native")': {"ssan_plugin.modules.native"},
    'importlib.import_module(".datadir", __package__)': {"ssan_plugin.srl.datadir"},
    'importlib.import_module(".datadir", __spec__.parent)': {"ssan_plugin.srl.datadir"},
    'importlib.import_module("..tasks.srl", package="ssan_plugin.srl")': {"ssan_plugin.tasks.srl"},
    'importlib.import_module("ssan_plugin.no_such_module")': {"ssan_plugin.no_such_module"},
    '__import__("ssan_plugin.cli")': {"ssan_plugin.cli"},
    'builtins.__import__("ssan_plugin")': {"ssan_plugin"},
    '__import__("ssan_plugin.modules", fromlist=["native", "not_a_module"])': {
        "ssan_plugin.modules.native", "ssan_plugin.modules"},
    '__import__("tasks.srl", globals(), locals(), ["SRLTask"], 2)': {"ssan_plugin.tasks.srl"},
    '__import__("", globals(), None, ["datadir"], level=1)': {"ssan_plugin.srl.datadir"},
    # not seen: a name that is not a literal, a relative name without its package, another
    # package, another callable
    "importlib.import_module(name)": set(),
    'importlib.import_module(".datadir")': set(),
    'importlib.import_module("fairseq.models")': set(),
    '__import__("fairseq", fromlist=["ssan_plugin"])': set(),
    'importlib.reload("ssan_plugin.cli")': set(),
}


@pytest.mark.parametrize("call", sorted(STRING_IMPORTS))
def test_the_reader_sees_imports_by_a_literal_string(call):
    known = {"ssan_plugin", "ssan_plugin.cli", "ssan_plugin.tasks", "ssan_plugin.tasks.srl",
             "ssan_plugin.srl", "ssan_plugin.srl.evaluate", "ssan_plugin.srl.datadir",
             "ssan_plugin.modules", "ssan_plugin.modules.native"}
    source = ("import builtins\nimport importlib\nfrom importlib import import_module\n"
              f"def f(name):\n    return {call}\n")
    assert imports_of(source, "ssan_plugin.srl.evaluate", False, known) == STRING_IMPORTS[call]


def test_the_reader_resolves_a_string_import_in_a_package_and_checks_it():
    known = {"ssan_plugin", "ssan_plugin.cli", "ssan_plugin.srl", "ssan_plugin.srl.datadir"}
    # in a package's __init__, __name__ is the package itself
    assert imports_of('importlib.import_module(".datadir", __name__)\n', "ssan_plugin.srl",
                      True, known) == {"ssan_plugin.srl.datadir"}
    assert imports_of('importlib.import_module(".cli", __package__)\n', "ssan_plugin", True,
                      known) == {"ssan_plugin.cli"}
    assert front_end_imports('importlib.import_module("scripts.demo")\n__import__("bench_steps")\n'
                             'importlib.import_module(".probe", __package__)\n'
                             '__import__("probe", globals(), None, [], 1)\n',
                             {"bench_steps", "probe"}) == {"scripts.demo", "bench_steps"}
    # an import by string is an arrow like any other: up a layer is reported
    edge = ("ssan_plugin.cli", "ssan_plugin.srl.datadir")
    found = imports_of('__import__("ssan_plugin.srl.datadir")\n', edge[0], True, known)
    assert found == {edge[1]}
    modules = package_modules()
    reported = [p for p in violations({(edge[0], t) for t in found}, modules)
                if p.startswith(" -> ".join(edge))]
    assert reported and "up from layer 'helpers' to 'data'" in reported[0], reported


def test_every_module_has_a_layer_and_unknown_targets_are_reported():
    modules = set(package_modules())
    assert all(layer_of(m) is not None for m in modules)
    assert layer_of("ssan_plugin") == layer_of("ssan_plugin.hub") - 1  # the root: __init__ only
    assert layer_of("ssan_plugin.not_placed") is None
    problems = violations({("ssan_plugin.cli", "ssan_plugin.no_such_module")},
                          modules | {"ssan_plugin.not_placed"})
    assert any("ssan_plugin.not_placed: no layer" in p for p in problems)
    assert any("not a module of the package" in p for p in problems)
