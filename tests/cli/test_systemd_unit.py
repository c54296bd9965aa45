"""deploy/cdc.service, the unit README shows, and deploy/cdc-stream@.service (a stream on
another host, docs/streams.md) are valid for this machine's systemd (`systemd-analyze verify`,
with their paths pointed at this checkout)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
@pytest.mark.parametrize(
    "name, command, instance",
    [
        ("cdc.service", "start --config /etc/cdc/cdc.toml", "cdc.service"),
        (
            "cdc-stream@.service",
            "stream serve --config /etc/cdc/cdc.toml --stream %i",
            "cdc-stream@1.service",
        ),
    ],
)
def test_the_unit_verifies(tmp_path: Path, name: str, command: str, instance: str):
    text = (ROOT / "deploy" / name).read_text()
    assert f"ExecStart=/opt/cdc/.venv/bin/cdc {command}" in text
    text = text.replace("/opt/cdc/.venv/bin/cdc", str(ROOT / ".venv" / "bin" / "cdc")).replace(
        "/opt/cdc", str(ROOT)
    )
    unit = tmp_path / instance
    unit.write_text(text)
    res = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    if res.returncode != 0 and "Failed to" in res.stderr and "bus" in res.stderr.lower():
        pytest.skip(f"systemd-analyze cannot run here: {res.stderr.strip()}")
    # Unknown keys or sections are only warnings (exit 0): none is allowed either.
    assert res.returncode == 0 and str(unit) not in res.stderr, res.stderr
