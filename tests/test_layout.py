"""The package layout's import rules (docs/ARCHITECTURE.md, section "Package map"), checked on
the source: every .py of the repository's packages is parsed with `ast` (nothing is imported, no
cluster), and every import counts, lazy ones inside functions and those under `TYPE_CHECKING`
included, as do `importlib.import_module("...")` calls with a literal name.

A rule is a row of RULES: which packages it applies to, and which imports it forbids them. To add
one, add a row; `forbids` gets the imported module's dotted name and the importing package.

Beyond the rows: no import circle between modules (`test_no_import_circle`, on the module graph
of every package, lazy imports included: they are few, and a circle closed lazily is still a
circle a reader must untangle). Imports under `if TYPE_CHECKING:` are left out of that graph
(the rows still count them): they never run, and a protocol naming the type it is handed
(dumper/pipeline/term.py's `Takeover.watch(leader: Leader)`) declares, it does not depend.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The stages in the order data flows through them: a stage imports no later one (a rule below).
# DN -> merge_source -> merge_joint -> dumper is the pipeline; the others sit where their
# imports put them: topology (the GMS history of topology and schema) after merge_source, which
# needs none of it, and before merge_joint and the dumper, which read it; binlog_writer (writes
# what the merge released) before the dumper, which drives it and serves its files; history (points
# of the global binlog and flashback, read from the files) after binlog_writer; read_path
# (rows of logical tables as of a binlog position: the CN protocol's catalogue and TSO, the DN
# client, the served files through a protocol of its own) before the dumper, whose server hands
# it to its SQL answers; backfill last: it reads the dumper's output over the wire (no import),
# topology, and the read path's changed-keys decoder.
STAGES = (
    "merge_source",
    "topology",
    "merge_joint",
    "binlog_writer",
    "history",
    "read_path",
    "dumper",
    "backfill",
)
# What runs in production: the foundation and the stages. bench/ and cdc_cli/ are outside it.
RUNTIME = ("cdc", *STAGES)
# Equipment for tests, the demo and operators, outside the runtime, one package: the reference
# CN, the local MariaDB cluster, the checks of `cdc check` and `cdc verify-binlog`, and (its own
# modules) the test hooks and process identity.
EQUIPMENT = "cdc_equipment"
CN, LOCAL_CLUSTER, CHECKS = (f"{EQUIPMENT}.{p}" for p in ("cn", "local_cluster", "checks"))
# The `cdc` command's package: the top of the graph.
CLI = "cdc_cli"
# Every top-level name: what a wheel installs (pyproject.toml) and what runs from a checkout.
INSTALLED = (*RUNTIME, CLI, EQUIPMENT)
TOP_LEVEL = (*INSTALLED, "bench", "tests")


def packages() -> tuple[str, ...]:
    """Every top-level package of the repository (a directory with an __init__.py)."""
    return tuple(sorted(p.parent.name for p in ROOT.glob("*/__init__.py")))


def within(*names: str) -> Callable[[str, str], bool]:
    """Forbids importing any of `names` or anything under them."""
    return lambda module, _importer: any(module == n or module.startswith(n + ".") for n in names)


@functools.cache
def exported(package: str) -> frozenset[str]:
    """The names in `package/__init__.py`'s `__all__`."""
    tree = ast.parse((ROOT / package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def submodule_of_another_stage(module: str, importer: str) -> bool:
    """`stage.x` where x is a module or subpackage of another stage that its __init__ does not
    export (a module may be part of the API: `from topology import gms`)."""
    top, _, rest = module.partition(".")
    if top not in STAGES or top == importer or not rest:
        return False
    path = ROOT.joinpath(top, *rest.split("."))
    is_module = path.with_suffix(".py").exists() or path.is_dir()
    return is_module and rest not in exported(top)


@dataclass(frozen=True)
class Rule:
    name: str
    applies_to: Callable[[], tuple[str, ...]]  # top-level packages (a callable: discovered late)
    forbids: Callable[[str, str], bool]  # (imported module, importing package) -> forbidden?


def later_stage(module: str, importer: str) -> bool:
    """A stage after the importing one in STAGES (data flows one way)."""
    top = module.partition(".")[0]
    return top in STAGES and STAGES.index(top) > STAGES.index(importer)


RULES = [
    Rule(
        "the foundation (cdc/) imports no stage package, no equipment, no bench, no cdc_cli",
        lambda: ("cdc",),
        within(*STAGES, EQUIPMENT, "bench", CLI),
    ),
    Rule(
        "nothing but cdc_cli/ and the tests imports cdc_cli",
        lambda: tuple(p for p in packages() if p not in (CLI, "tests")),
        within(CLI),
    ),
    Rule("the runtime imports no bench", lambda: RUNTIME, within("bench")),
    Rule(
        "a stage imports another stage only through its package's public API (its __init__)",
        lambda: STAGES,
        submodule_of_another_stage,
    ),
    Rule(
        "no stage imports a later one (" + " -> ".join(STAGES) + ")",
        lambda: STAGES,
        later_stage,
    ),
    # The pipeline speaks the CN protocol through cdc.cn_protocol; the backfill writes its
    # watermarks through the CnConnector its caller passes.
    Rule(
        "no runtime stage imports the equipment (cdc_equipment: the reference CN, the local "
        "cluster, the checks, the test hooks)",
        lambda: STAGES,
        within(EQUIPMENT),
    ),
    # Within the equipment (a rule's package may be a subpackage: dotted).
    Rule(
        "the local cluster (cdc_equipment/local_cluster/) imports only the foundation and the "
        "equipment's own modules: it starts MariaDB, nothing of the pipeline or the CN",
        lambda: (LOCAL_CLUSTER,),
        within(*STAGES, CN, CHECKS, "bench", CLI),
    ),
    Rule(
        "the reference CN (cdc_equipment/cn/) imports no stage, no local cluster, no checks: it "
        "writes to the DNs by the CN protocol alone",
        lambda: (CN,),
        within(*STAGES, LOCAL_CLUSTER, CHECKS, "bench", CLI),
    ),
    Rule(
        "the checks (cdc_equipment/checks/) import no stage: they judge the pipeline's output "
        "from outside it",
        lambda: (CHECKS,),
        within(*STAGES, LOCAL_CLUSTER, "bench", CLI),
    ),
]


# The server's parts (docs/dumper.md), layered wire -> sql / dump -> store: the protocol loop
# answers through the handler interfaces of handlers.py and imports neither sql/ nor dump/;
# sql/ and dump/ import each other not, and read the served files from store/; store/ is the
# bottom and imports no other part, nor what assembles them. Each row: the part, what it must
# not import (modules of dumper/server/).
SERVER = "dumper.server"
SERVER_LAYERS = {
    "wire": ("sql", "dump", "store"),
    "sql": ("wire", "dump"),
    "dump": ("wire", "sql"),
    "store": (
        "wire",
        "sql",
        "dump",
        "context",
        "handlers",
        "holders",
        "server",
        "serve_process",
        "users",
    ),
}


@dataclass(frozen=True)
class Import:
    path: Path
    line: int
    module: str
    type_only: bool = False  # under `if TYPE_CHECKING:`: for annotations, never run


def _is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`, the test of an `if`."""
    return (
        isinstance(test, ast.Name)
        and test.id == "TYPE_CHECKING"
        or isinstance(test, ast.Attribute)
        and test.attr == "TYPE_CHECKING"
    )


@functools.cache
def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    """Every module `path` imports, as a dotted name: `from a import b` yields both `a` and
    `a.b` (b may be a module); relative imports are resolved against the file's package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(root).parent.parts
    found = []
    type_only = set()  # the lines of the statements under `if TYPE_CHECKING:`
    for node in ast.walk(tree):  # once: the walks are most of this file's time
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            type_only |= {
                n.lineno for stmt in node.body for n in ast.walk(stmt) if hasattr(n, "lineno")
            }
        elif isinstance(node, ast.Import):
            found += [Import(path, node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package[: len(package) - node.level + 1]
                base = ".".join([*parts, node.module] if node.module else parts)
            else:
                base = node.module or ""
            found.append(Import(path, node.lineno, base))
            found += [Import(path, node.lineno, f"{base}.{a.name}") for a in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and not node.args[0].value.startswith(".")
        ):
            found.append(Import(path, node.lineno, node.args[0].value))
    return [Import(i.path, i.line, i.module, i.line in type_only) for i in found]


def violations(rule: Rule) -> list[str]:
    out = {}  # one line per import statement: `from a import b` is `a` and `a.b`
    for package in rule.applies_to():
        for path in sorted(ROOT.joinpath(*package.split(".")).rglob("*.py")):
            for imp in imports_of(path):
                where = f"{path.relative_to(ROOT)}:{imp.line}"
                if where not in out and rule.forbids(imp.module, package):
                    out[where] = f"{where} imports {imp.module}"
    return list(out.values())


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_import_rule(rule: Rule):
    found = violations(rule)
    assert not found, f"{rule.name}:\n" + "\n".join(found)


def test_the_server_parts_are_layered():
    found = []
    for part, forbidden in SERVER_LAYERS.items():
        directory = ROOT.joinpath(*SERVER.split("."), part)
        assert directory.is_dir(), f"{directory} is not there: the layers name a missing part"
        for path in sorted(directory.rglob("*.py")):
            for imp in imports_of(path):
                for other in forbidden:
                    name = f"{SERVER}.{other}"
                    if imp.module == name or imp.module.startswith(name + "."):
                        found.append(f"{path.relative_to(ROOT)}:{imp.line} imports {imp.module}")
    assert not found, "the server's layers (wire -> sql / dump -> store):\n" + "\n".join(
        sorted(set(found))
    )


def test_the_rules_see_the_packages():
    """A rule over packages that are not there would pass for nothing."""
    assert set(TOP_LEVEL) <= set(packages())
    for sub in (CN, LOCAL_CLUSTER, CHECKS):
        assert ROOT.joinpath(*sub.split("."), "__init__.py").exists(), sub
    assert any(i.module == "cdc.config" for i in imports_of(ROOT / CLI / "main.py"))
    # Lazy imports count: cdc_cli/commands/bench.py imports every bench inside its functions.
    lazy = {i.module for i in imports_of(ROOT / CLI / "commands" / "bench.py")}
    assert "bench.pipeline" in lazy
    # The direction: merge_source imports neither merge_joint nor dumper, merge_joint no dumper.
    assert later_stage("merge_joint.merger", "merge_source")
    assert later_stage("dumper", "merge_joint")
    # The read path is a stage before the dumper, whose server hands it to its SQL answers.
    assert later_stage("dumper.server", "read_path") and not later_stage("read_path", "dumper")
    assert not later_stage("merge_source.scan", "dumper")


def test_no_generic_top_level_name():
    """The top-level names are the foundation, the stages, `cdc_cli`, `cdc_equipment` (what a
    wheel installs: pyproject.toml's packages.find) and the checkout's bench/ and tests/: a new
    top-level package would install a name of its own into site-packages."""
    assert set(packages()) == set(TOP_LEVEL)
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    include = find["find"]["include"]
    assert {p for p in packages() if any(fnmatch(p, i) for i in include)} == set(INSTALLED)


def test_relative_and_lazy_imports_resolve(tmp_path):
    pkg = tmp_path / "pkg" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "m.py").write_text(
        "from . import a\nfrom ..b import c\n\ndef f():\n    import importlib\n"
        "    importlib.import_module('x.y')\n"
    )
    modules = {i.module for i in imports_of(pkg / "m.py", root=tmp_path)}
    assert {"pkg.sub", "pkg.sub.a", "pkg.b", "pkg.b.c", "importlib", "x.y"} <= modules


def module_names(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the repository's packages by dotted name (a package by its __init__)."""
    found = {}
    for init in root.glob("*/__init__.py"):
        for path in init.parent.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules of the repository it imports. `from a import b` is an edge to `a.b`
    when b is a module, else to `a` (b is a name of a); the parent packages Python initialises
    on the way are not edges (every submodule would otherwise close a circle with an __init__
    that re-exports it)."""
    modules = module_names(root)

    def owner(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in modules.items():
        by_statement: dict[int, list[str]] = {}
        for imp in imports_of(path, root):
            if not imp.type_only:
                by_statement.setdefault(imp.line, []).append(imp.module)
        edges = set()
        for names in by_statement.values():
            for name in names:
                members = [n for n in names if n.startswith(name + ".")]
                if members and all(n in modules for n in members):
                    continue  # `from a import b, c` of modules: only a.b and a.c are imported
                edges.add(owner(name))
        graph[module] = edges - {"", module}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
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
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def test_no_import_circle():
    circles = import_circles(module_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_import_circles_are_found(tmp_path):
    """The graph and the circle finder on a made-up tree: a lazy import closes a circle, a
    submodule importing its sibling through the package does not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import A\n")
    (pkg / "a.py").write_text("from pkg import b\nA = 1\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.sub import c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("import pkg.b\n")
    (pkg / "d.py").write_text("from pkg import A\n")  # a name of pkg: an edge to its __init__
    (pkg / "e.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.d import X\n"
    )
    graph = module_graph(tmp_path)
    assert graph["pkg.a"] == {"pkg.b"}
    assert graph["pkg.d"] == {"pkg"}
    assert graph["pkg.e"] == set()  # an annotation's import is not an edge
    assert import_circles(graph) == [["pkg.b", "pkg.sub.c"]]


def test_the_metrics_module_loads_no_database_client():
    """dumper/metrics.py reads TSOs through cdc/tso_layout.py, not the CN protocol's TSO oracle
    (which imports PyMySQL)."""
    code = "import sys, dumper.metrics; print('pymysql' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
