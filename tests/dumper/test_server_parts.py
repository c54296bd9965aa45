"""The server's parts meet only in dumper/server/handlers.py (go-mysql's Handler split): the
protocol loop (wire/) imports nothing of what answers it (sql/, dump/), the dump part nothing of
the SQL part, and neither the wire. Checked on the source, like tests/test_layout.py."""

from __future__ import annotations

import pytest

from tests.test_layout import ROOT, imports_of

SERVER = ROOT / "dumper" / "server"
# part -> the other parts it must not import
FORBIDDEN = {
    "wire": ("dumper.server.sql", "dumper.server.dump"),
    "sql": ("dumper.server.wire",),
    "dump": ("dumper.server.wire", "dumper.server.sql"),
}


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_a_part_imports_no_other_but_through_the_handlers(part):
    bad = [
        f"{imp.path.relative_to(ROOT)}:{imp.line}: {imp.module}"
        for path in sorted((SERVER / part).glob("*.py"))
        for imp in imports_of(path)
        if any(imp.module == f or imp.module.startswith(f + ".") for f in FORBIDDEN[part])
    ]
    assert not bad, "\n".join(bad)
