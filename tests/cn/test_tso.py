"""TSOs are unique and linearizable across two CN processes, and keep increasing across a GMS
restart (on a private cluster: the shared GMS is never restarted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cdc.tso_layout import compose, logical, physical_ms

ROOT = Path(__file__).parents[2]


def probe(config_file: Path, n: int, tasks: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.cn.tso_probe", str(config_file), str(n), str(tasks)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def collect(*procs: subprocess.Popen) -> list[tuple[int, int, int]]:
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        out += [tuple(json.loads(line)) for line in stdout.splitlines()]
    return out


def assert_linearizable(samples: list[tuple[int, int, int]]) -> None:
    """Unique, and a TSO requested after another was returned is larger (any process)."""
    tsos = [s[2] for s in samples]
    assert len(set(tsos)) == len(tsos)
    by_end = sorted(samples, key=lambda s: s[1])
    best, j = -1, 0
    for start, _end, tso in sorted(samples):
        while j < len(by_end) and by_end[j][1] < start:
            best = max(best, by_end[j][2])
            j += 1
        assert tso > best, f"TSO {tso} requested after {best} was returned"


def test_tso_layout():
    t = compose(1_700_000_000_000, 5)
    assert physical_ms(t) == 1_700_000_000_000 and logical(t) == 5 and t < 2**63


def test_two_cn_processes_then_gms_restart(small_cluster, small_config, tmp_path):
    config_file = tmp_path / "cdc.toml"
    small_config.dump(config_file)
    first = collect(probe(config_file, 400, 4), probe(config_file, 400, 4))
    assert len(first) == 800
    assert_linearizable(first)

    small_cluster.gms.stop()
    small_cluster.gms.start()
    after = collect(probe(config_file, 50, 1))
    assert min(s[2] for s in after) > max(s[2] for s in first)
    assert_linearizable(first + after)
