"""The dependency rules of the foundation (docs/ARCHITECTURE.md), read from the source: the
foundation imports no stage, and no runtime stage imports the reference CN (`cdc.cn`: tests,
demo and benchmarks only); the pipeline speaks the CN protocol through `cdc.cn_protocol`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("merge_source", "merge_joint", "topology", "binlog_writer", "dumper", "backfill")
# The CLI lives in cdc/ until it moves to cli/ (issue 20), and benchmarks to bench/.
NOT_RUNTIME = ("cdc/cli.py", "cdc/commands/")
# backfill reads the reference CN's catalogue and writes its watermark through a ComputeNode.
CN_IMPORT_PENDING = ("backfill/",)


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def sources(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(NOT_RUNTIME) and not path.name.startswith("bench"):
            yield rel, path


def test_the_foundation_imports_no_stage():
    bad = [
        f"{rel}: {name}"
        for rel, path in sources("cdc")
        for name in imports(path)
        if name.split(".")[0] in STAGES
    ]
    assert not bad, bad


def test_no_runtime_stage_imports_the_reference_cn():
    bad = [
        f"{rel}: {name}"
        for stage in STAGES
        for rel, path in sources(stage)
        if not rel.startswith(CN_IMPORT_PENDING)
        for name in imports(path)
        if name == "cdc.cn" or name.startswith("cdc.cn.")
    ]
    assert not bad, bad
