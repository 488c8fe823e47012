"""docs/architecture.md, checked against the code it describes, read with ``ast`` (nothing is
imported).

Walks: each ``## Walk N`` section has one code block whose first line declares the walk,
``Walk N: --option (names: a, b, ...)``, the spellings under which the option travels through
the code. Every ``path/to/file.py:Name`` (or ``:Class.method``, ``:Dataclass.field``) in the
block is a stop: the file must exist, the name must be defined in it, and its code must use one
of the spellings (or the option itself in a string). What is checked of a stop: a function or
method, its body (docstrings left out); a class, the whole class; a dataclass field, its
statement. A ``path/to/file.c:function`` stop is checked by text: the function's definition and
a spelling in it. Text in backquotes on the lines after a stop quotes that stop's code and must
appear in it verbatim (whitespace aside).

The mirroring tests: the modules of ``ssan_plugin/`` without a ``tests/unit/<package>/
test_<module>.py`` are exactly those the page lists as such.

The negative cases run the same checks on doctored copies of the page (and of the code) in a
temporary directory, and assert each doctoring is reported.
"""

import ast
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pytest
from conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"
PACKAGE = "ssan_plugin"

HEADER = re.compile(r"^Walk (?P<number>\d+): (?P<option>--[a-z0-9-]+) \(names: (?P<names>[^)]+)\)$")
HEADING = re.compile(r"^## Walk (?P<number>\d+): `(?P<option>--[a-z0-9-]+)`$", re.M)
FENCE = re.compile(r"^```[^\n]*\n(?P<body>.*?)^```$", re.M | re.S)
STOP = re.compile(r"(?P<path>[\w./-]+\.(?:py|c)):(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")
QUOTE = re.compile(r"`([^`\n]+)`")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ---------------------------------------------------------------- reading the page

@dataclass
class Stop:
    path: str
    name: str
    line: int  # in the page
    quotes: List[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.path}:{self.name} (line {self.line})"


@dataclass
class Walk:
    number: int
    option: str
    names: Tuple[str, ...]
    stops: List[Stop]


def read_walks(text: str) -> Tuple[List[Walk], List[str]]:
    """The walks of the page and the problems of its form (a walk section without its block or
    header, a header that does not match its section's heading)."""
    walks, problems = [], []
    headings = list(HEADING.finditer(text))
    if not headings:
        problems.append("no '## Walk N: `--option`' section")
    for k, heading in enumerate(headings):
        start = heading.end()
        following = text.find("\n## ", start)
        end = following if following >= 0 else len(text)
        section = text[start:end]
        number, option = int(heading["number"]), heading["option"]
        blocks = [b for b in FENCE.finditer(section)
                  if HEADER.match(b["body"].split("\n", 1)[0])]
        if len(blocks) != 1:
            problems.append(f"Walk {number} ({option}): {len(blocks)} code blocks with a "
                            f"'Walk N: --option (names: ...)' header, expected one")
            continue
        body = blocks[0]["body"]
        header = HEADER.match(body.split("\n", 1)[0])
        if (int(header["number"]), header["option"]) != (number, option):
            problems.append(f"Walk {number} ({option}): its block's header says Walk "
                            f"{header['number']}: {header['option']}")
            continue
        names = tuple(n.strip() for n in header["names"].split(",") if n.strip())
        first_line = text.count("\n", 0, start + blocks[0].start("body")) + 1
        walks.append(Walk(number, option, names, read_stops(body, first_line)))
    numbers = [w.number for w in walks]
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"walks numbered {numbers}, expected 1, 2, ... in order")
    return walks, problems


def read_stops(body: str, first_line: int) -> List[Stop]:
    """The stops of a walk's block, each with the backquoted code of the lines up to the next
    stop."""
    stops: List[Stop] = []
    for offset, line in enumerate(body.splitlines()):
        found = list(STOP.finditer(line))
        for match in found:
            stops.append(Stop(match["path"], match["name"], first_line + offset))
        if stops:
            rest = line if not found else line[found[-1].end():]
            stops[-1].quotes.extend(QUOTE.findall(rest))
    return stops


# ---------------------------------------------------------------- checking a stop

def _docstrings(tree: ast.AST) -> set:
    """ids of the docstring nodes in ``tree``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _defined(body: Sequence[ast.stmt], name: str) -> List[ast.AST]:
    """The statements of ``body`` that define ``name``: functions (a property's getter and
    setter are both kept), classes, assignments (a dataclass field)."""
    found = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                found.append(node)
        elif isinstance(node, ast.AnnAssign):
            if isinstance(node.target, ast.Name) and node.target.id == name:
                found.append(node)
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                found.append(node)
    return found


def _checked_part(node: ast.AST) -> List[ast.AST]:
    """What of a definition must use the option: a function's body, a whole class, a field's
    statement."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return list(node.body)
    return [node]


def _words(nodes: Sequence[ast.AST], docstrings: set) -> Tuple[set, List[str]]:
    """(identifiers, string constants) used in ``nodes``, docstrings left out; an identifier's
    leading underscores are dropped (``self._rate_gradient`` is ``rate_gradient``)."""
    words, strings = set(), []
    for top in nodes:
        for node in ast.walk(top):
            name = None
            if isinstance(node, ast.Name):
                name = node.id
            elif isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.arg):
                name = node.arg
            elif isinstance(node, ast.keyword):
                name = node.arg
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = node.name
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docstrings:
                strings.append(node.value)
                words.update(w.lstrip("_") for w in WORD.findall(node.value))
            if name:
                words.add(name.lstrip("_"))
    return words, strings


def _normal(text: str) -> str:
    return " ".join(text.split())


def check_python_stop(stop: Stop, walk: Walk, source: str) -> List[str]:
    tree = ast.parse(source)
    parts = stop.name.split(".")
    nodes: List[ast.AST] = []
    scope: Sequence[ast.stmt] = tree.body
    for depth, part in enumerate(parts):
        nodes = _defined(scope, part)
        if not nodes:
            where = ".".join(parts[:depth]) or "the module"
            return [f"{stop}: no {'.'.join(parts[:depth + 1])} in {where}"]
        if depth + 1 < len(parts):
            classes = [n for n in nodes if isinstance(n, ast.ClassDef)]
            if not classes:
                return [f"{stop}: {'.'.join(parts[:depth + 1])} is not a class"]
            scope = classes[0].body
    problems = []
    checked = [part for node in nodes for part in _checked_part(node)]
    words, strings = _words(checked, _docstrings(tree))
    if not (words & set(walk.names) or any(walk.option in s for s in strings)):
        problems.append(f"{stop}: does not mention {walk.option} as any of "
                        f"{', '.join(walk.names)}")
    code = _normal(" ".join(ast.get_source_segment(source, node) or "" for node in nodes))
    problems += [f"{stop}: the quote `{quote}` is not in its code"
                 for quote in stop.quotes if _normal(quote) not in code]
    return problems


def c_function(source: str, name: str) -> Optional[str]:
    """The text of C function ``name``'s definition (signature and body, comments blanked),
    or None: a line starting at its first column with ``name(`` and no ``;`` or brace before
    it, whose parameter list is followed by a body (a prototype or a call is not one)."""
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    source = re.sub(r"//[^\n]*", " ", source)
    for match in re.finditer(rf"(?m)^(?![ \t#])[^;{{}}\n]*\b{re.escape(name)}\s*\(", source):
        depth, i = 1, match.end()
        while i < len(source) and depth:
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        if not source[i:].lstrip().startswith("{"):
            continue
        depth, j = 0, source.index("{", i)
        while j < len(source):
            depth += {"{": 1, "}": -1}.get(source[j], 0)
            j += 1
            if depth == 0:
                return source[match.start():j]
    return None


def check_c_stop(stop: Stop, walk: Walk, source: str) -> List[str]:
    text = c_function(source, stop.name)
    if text is None:
        return [f"{stop}: no definition of {stop.name}"]
    problems = []
    body = text[text.index("{"):]
    if not set(WORD.findall(body)) & set(walk.names):
        problems.append(f"{stop}: does not mention {walk.option} as any of "
                        f"{', '.join(walk.names)}")
    problems += [f"{stop}: the quote `{quote}` is not in its code"
                 for quote in stop.quotes if _normal(quote) not in _normal(text)]
    return problems


def check_stop(stop: Stop, walk: Walk, root: Path) -> List[str]:
    path = root / stop.path
    if Path(stop.path).is_absolute() or ".." in Path(stop.path).parts:
        return [f"{stop}: a stop names a file of the project by its path from the project root"]
    if not path.is_file():
        return [f"{stop}: no such file"]
    source = path.read_text(encoding="utf-8")
    if stop.path.endswith(".c"):
        return check_c_stop(stop, walk, source)
    return check_python_stop(stop, walk, source)


def check_page(text: str, root: Path = ROOT) -> List[str]:
    """Every problem of the page's walks, checked against the project at ``root``."""
    walks, problems = read_walks(text)
    for walk in walks:
        if len(walk.stops) < 2:
            problems.append(f"Walk {walk.number} ({walk.option}): {len(walk.stops)} stop(s)")
        for stop in walk.stops:
            problems += check_stop(stop, walk, root)
    return problems


# ---------------------------------------------------------------- the mirroring tests

def unmirrored_modules(root: Path = ROOT) -> List[str]:
    """Modules of the package (``__init__.py`` aside) without ``tests/unit/<package>/
    test_<module>.py``, as paths under ``ssan_plugin/``."""
    missing = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        if path.name == "__init__.py":
            continue
        relative = path.relative_to(root / PACKAGE)
        if not (root / "tests" / "unit" / relative.parent / f"test_{path.stem}.py").is_file():
            missing.append(relative.as_posix())
    return missing


def paragraph_on_tests(text: str) -> str:
    """The page's paragraph on the tests: from the line starting 'Tests:' to the next blank
    line that is not followed by a list item."""
    start = text.index("\nTests:")
    end = re.compile(r"\n\n(?!- )").search(text, start + 1)
    return text[start:end.start() if end else len(text)]


# ---------------------------------------------------------------- the page

WALKS, FORM_PROBLEMS = read_walks(DOC.read_text(encoding="utf-8"))


def test_the_walks_have_their_form():
    assert not FORM_PROBLEMS, "\n".join(FORM_PROBLEMS)
    assert [w.option for w in WALKS] == ["--ssan-tau", "--select-scale", "--relatedness-loss",
                                         "--srl-predicate-distance", "--pair-pooling"]
    assert all(len(w.stops) >= 2 for w in WALKS)


@pytest.mark.parametrize("walk", WALKS, ids=[f"walk{w.number}{w.option}" for w in WALKS])
def test_every_stop_of_the_walk_is_in_the_code(walk):
    problems = [p for stop in walk.stops for p in check_stop(stop, walk, ROOT)]
    assert not problems, "\n".join(problems)


def mirror_problems(text: str, root: Path = ROOT) -> List[str]:
    """What the page's paragraph on the tests gets wrong about the modules without a mirroring
    test: their count, the total, and the list (a package listed whole as "`pkg/` (all N
    modules)", or module by module)."""
    paragraph = paragraph_on_tests(text)
    missing = unmirrored_modules(root)
    total = sum(1 for p in (root / PACKAGE).rglob("*.py") if p.name != "__init__.py")
    problems = []
    counts = re.search(r"(\d+)\s+of\s+the\s+(\d+)\s+modules", paragraph)
    if not counts or (int(counts[1]), int(counts[2])) != (total - len(missing), total):
        problems.append(f"the page should say '{total - len(missing)} of the {total} modules'")
    said = re.search(r"(?i)these\s+(\d+)\s+do\s+not", paragraph)
    if not said or int(said[1]) != len(missing):
        problems.append(f"the page should say 'These {len(missing)} do not'")
    listed = set()
    the_list = paragraph[said.end():] if said else ""
    for quoted in QUOTE.findall(the_list):
        if quoted.endswith(".py") and (root / PACKAGE / quoted).is_file():
            listed.add(quoted)
        whole = re.search(rf"`{re.escape(quoted)}`\s+\(all\s+(\d+)\s+modules\)", the_list)
        if quoted.endswith("/") and whole:
            package = [m for m in missing if m.startswith(quoted)]
            modules = [p for p in (root / PACKAGE / quoted).glob("*.py") if p.name != "__init__.py"]
            if not int(whole[1]) == len(package) == len(modules):
                problems.append(f"`{quoted}` has {len(modules)} modules, {len(package)} "
                                f"without a mirroring test, the page says all {whole[1]}")
            listed.update(package)
    if listed != set(missing):
        problems.append(f"without a mirroring test but not listed: {sorted(set(missing) - listed)}"
                        f"; listed but mirrored: {sorted(listed - set(missing))}")
    return problems


def test_the_page_lists_the_modules_without_a_mirroring_test():
    problems = mirror_problems(DOC.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the check catches

def reported(problems: List[str], *fragments: str) -> bool:
    """Whether one of ``problems`` contains every fragment."""
    return any(all(f in p for f in fragments) for p in problems)


DOCTORED_PAGES = {  # name: (text of the page, its replacement, what one problem must say)
    "a method renamed": ("gumbel.py:GumbelSelector.from_args",
                         "gumbel.py:GumbelSelector.from_options",
                         ("no GumbelSelector.from_options in GumbelSelector",)),
    "a class renamed": ("selective_weights.py:_SampledSelectiveSoftmax.forward",
                        "selective_weights.py:_SampledSoftmax.forward",
                        ("no _SampledSoftmax in the module",)),
    "a function removed": ("modules/selection.py:gumbel_sigmoid_straight_through",
                           "modules/selection.py:gumbel_sigmoid",
                           ("no gumbel_sigmoid in the module",)),
    "a file removed": ("ssan_plugin/modules/selective_weights.py:sampled_selective_softmax",
                       "ssan_plugin/modules/selective_attention.py:sampled_selective_softmax",
                       ("selective_attention.py:sampled_selective_softmax", "no such file")),
    "a dataclass field renamed": ("gumbel.py:SSANSelectorOptions.ssan_tau",
                                  "gumbel.py:SSANSelectorOptions.ssan_temperature",
                                  ("no SSANSelectorOptions.ssan_temperature",)),
    "a stop the option does not pass": ("gumbel.py:GumbelSelector.fast_path",
                                        "gumbel.py:GumbelSelector.policy_logits",
                                        ("GumbelSelector.policy_logits",
                                         "does not mention --ssan-tau")),
    "a C function renamed": (".c:ssan_sampled_forward_rows", ".c:ssan_sampled_rows",
                             ("no definition of ssan_sampled_rows",)),
    "a quote the code does not have": ("else self.pooling(x, pad_mask)`",
                                       "else self.pool(x, pad_mask)`",
                                       ("PairClassifierModel.encode", "is not in its code")),
    "a walk without its header": ("Walk 4: --srl-predicate-distance (names:",
                                  "Walk 4: --srl-predicate-distance (spellings:",
                                  ("Walk 4 (--srl-predicate-distance): 0 code blocks",)),
}


@pytest.mark.parametrize("case", sorted(DOCTORED_PAGES))
def test_the_check_reports_a_doctored_page(case, tmp_path):
    old, new, expected = DOCTORED_PAGES[case]
    text = DOC.read_text(encoding="utf-8")
    assert old in text, f"the page no longer has {old!r}: update this case"
    page = tmp_path / "architecture.md"
    page.write_text(text.replace(old, new), encoding="utf-8")
    problems = check_page(page.read_text(encoding="utf-8"), ROOT)
    assert reported(problems, *expected), problems


DOCTORED_CODE = {  # name: (file, its text, the replacement, what one problem must say)
    "a method renamed in the code": ("ssan_plugin/modules/selectors/gumbel.py",
                                     "    def from_args(cls, args, embed_dim, num_heads):",
                                     "    def from_namespace(cls, args, embed_dim, num_heads):",
                                     ("no GumbelSelector.from_args in GumbelSelector",)),
    "the option no longer passed on": ("ssan_plugin/modules/native.py", "float(tau), float(cap),",
                                       "0.5, float(cap),",
                                       ("NativeSampledSelectiveSoftmax.forward",
                                        "does not mention --ssan-tau")),
    "a C function renamed in the code": ("ssan_plugin/modules/csrc/sampled_selective_softmax.c",
                                         "int ssan_sampled_forward_rows(",
                                         "int ssan_forward_rows(",
                                         ("no definition of ssan_sampled_forward_rows",)),
}


@pytest.mark.parametrize("case", sorted(DOCTORED_CODE))
def test_the_check_reports_doctored_code(case, tmp_path):
    name, old, new, expected = DOCTORED_CODE[case]
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    path = tmp_path / name
    source = path.read_text(encoding="utf-8")
    assert old in source, f"{name} no longer has {old!r}: update this case"
    text = DOC.read_text(encoding="utf-8")
    assert not check_page(text, tmp_path)  # the copy passes as the project does
    path.write_text(source.replace(old, new), encoding="utf-8")
    assert reported(check_page(text, tmp_path), *expected), check_page(text, tmp_path)


DOCTORED_TESTS = {  # name: (text of the page, its replacement, what must be reported); {n}: the
    # number of modules without a mirroring test
    "a module dropped from the list": ("- `pairs/evaluate.py`: ", "- ",
                                       "not listed: ['pairs/evaluate.py']"),
    "a mirrored module listed": ("`srl/corpus.py`, ", "`srl/corpus.py`, `srl/io.py`, ",
                                 "listed but mirrored: ['srl/io.py']"),
    "a wrong count": ("These {n} do not", "These {fewer} do not", "should say 'These {n} do not'"),
}


@pytest.mark.parametrize("case", sorted(DOCTORED_TESTS))
def test_the_check_reports_a_doctored_list_of_tests(case):
    n = len(unmirrored_modules())
    old, new, expected = (part.format(n=n, fewer=n - 1) for part in DOCTORED_TESTS[case])
    text = DOC.read_text(encoding="utf-8")
    assert old in text, f"the page no longer has {old!r}: update this case"
    problems = mirror_problems(text.replace(old, new))
    assert any(expected in p for p in problems), problems


def test_the_reader_of_c_finds_definitions_not_calls():
    source = ("/* int f(int tau) { } */\n"
              "static inline __attribute__((always_inline)) float g(float tau) {\n"
              "    return f(tau);\n}\n"
              "int f(int x);\n"
              "int f(int x) {\n    return x;\n}\n")
    assert c_function(source, "g").startswith("static inline")
    assert c_function(source, "f") == "int f(int x) {\n    return x;\n}"
    assert c_function(source, "h") is None
