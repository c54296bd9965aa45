"""The package layout's import rules (docs/ARCHITECTURE.md, "Package map"), checked on the
source: every .py of the repository's packages is parsed with `ast` (nothing is imported, no
cluster), and every import counts, lazy ones inside functions included, as do
`importlib.import_module("...")` calls with a literal name.

A rule is a row of RULES: which packages it applies to, and which imports it forbids them. To add
one, add a row; `forbids` gets the imported module's dotted name and the importing package.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

STAGES = ("merge_source", "merge_joint", "topology", "binlog_writer", "dumper", "backfill")
# What runs in production: the foundation and the stages. bench/ and cli/ are outside it.
RUNTIME = ("cdc", *STAGES)


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


RULES = [
    Rule(
        "the foundation (cdc/) imports no stage package, no bench, no cli",
        lambda: ("cdc",),
        within(*STAGES, "bench", "cli"),
    ),
    Rule(
        "nothing but cli/ and the tests imports cli",
        lambda: tuple(p for p in packages() if p not in ("cli", "tests")),
        within("cli"),
    ),
    Rule("the runtime imports no bench", lambda: RUNTIME, within("bench")),
    Rule(
        "a stage imports another stage only through its package's public API (its __init__)",
        lambda: STAGES,
        submodule_of_another_stage,
    ),
    # The pipeline speaks the CN protocol through cdc.cn_protocol; the backfill writes its
    # watermarks through the CnConnector its caller passes.
    Rule("no runtime stage imports the reference CN (cn)", lambda: STAGES, within("cn")),
]


@dataclass(frozen=True)
class Import:
    path: Path
    line: int
    module: str


def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    """Every module `path` imports, as a dotted name: `from a import b` yields both `a` and
    `a.b` (b may be a module); relative imports are resolved against the file's package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(root).parent.parts
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
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
    return found


def violations(rule: Rule) -> list[str]:
    out = {}  # one line per import statement: `from a import b` is `a` and `a.b`
    for package in rule.applies_to():
        for path in sorted((ROOT / package).rglob("*.py")):
            for imp in imports_of(path):
                where = f"{path.relative_to(ROOT)}:{imp.line}"
                if where not in out and rule.forbids(imp.module, package):
                    out[where] = f"{where} imports {imp.module}"
    return list(out.values())


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_import_rule(rule: Rule):
    found = violations(rule)
    assert not found, f"{rule.name}:\n" + "\n".join(found)


def test_the_rules_see_the_packages():
    """A rule over packages that are not there would pass for nothing."""
    assert set(RUNTIME) | {"bench", "cli", "tests"} <= set(packages())
    assert any(i.module == "cdc.config" for i in imports_of(ROOT / "cli" / "main.py"))
    # Lazy imports count: cli/commands/bench.py imports every bench inside its functions.
    lazy = {i.module for i in imports_of(ROOT / "cli" / "commands" / "bench.py")}
    assert "bench.pipeline" in lazy


def test_relative_and_lazy_imports_resolve(tmp_path):
    pkg = tmp_path / "pkg" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "m.py").write_text(
        "from . import a\nfrom ..b import c\n\ndef f():\n    import importlib\n"
        "    importlib.import_module('x.y')\n"
    )
    modules = {i.module for i in imports_of(pkg / "m.py", root=tmp_path)}
    assert {"pkg.sub", "pkg.sub.a", "pkg.b", "pkg.b.c", "importlib", "x.y"} <= modules
