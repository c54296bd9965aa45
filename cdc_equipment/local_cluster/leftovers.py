"""Processes a checkout left running: any whose working directory or command line lies in it.

`make stop` must leave none (the user's path, checked by .ci/run and the README test):
`python -m cdc_equipment.local_cluster.leftovers [DIR]` lists them and exits 1 if there are any. The caller
and its ancestors (the shell running the check, make, …) are not counted. It lists too the
network namespaces a test's hosts (cdc_equipment/local_cluster/hosts.py) left after their process died, and
the Docker containers, networks and volumes of this project (labelled CONTAINER_LABEL by the
images, docker-compose.yml and tests/containers) when a Docker engine answers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from cdc_equipment.local_cluster.hosts import leftover_namespaces


def _ancestors(pid: int) -> set[int]:
    seen = set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return seen


def _names_path_in(args: list[str], cwd: str, inside: str) -> bool:
    """Whether an argument (or the value of an `--option=value`) is a path below `inside`,
    relative paths taken from the process's working directory."""
    for arg in args:
        for word in (arg, arg.partition("=")[2]):
            if word and (os.path.normpath(os.path.join(cwd, word)) + os.sep).startswith(inside):
                return True
    return False


def leftover_processes(root: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every live process, other than this one and its ancestors,
    whose working directory is `root` or below, or whose command line names a path there
    (`--config var/demo/cdc.toml` run from the checkout names one below var/demo)."""
    root = Path(root).resolve()
    inside = str(root) + os.sep
    mine = _ancestors(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                continue
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        if (cwd + os.sep).startswith(inside) or _names_path_in(args, cwd, inside):
            found.append((int(entry.name), " ".join(args).strip()))
    return sorted(found)


CONTAINER_LABEL = "org.cdc.project=global-binlog"


def leftover_containers() -> list[str]:
    """'container NAME', 'network NAME', 'volume NAME' of every Docker object labelled
    CONTAINER_LABEL (running or not); none when there is no docker command or engine."""
    if shutil.which("docker") is None:
        return []
    found = []
    for kind, listing in (
        ("container", ["ps", "-a"]),
        ("network", ["network", "ls"]),
        ("volume", ["volume", "ls"]),
    ):
        try:
            done = subprocess.run(
                [
                    "docker",
                    *listing,
                    "--filter",
                    f"label={CONTAINER_LABEL}",
                    "--format",
                    "{{.Name}}" if kind != "container" else "{{.Names}}",
                ],
                capture_output=True,
                text=True,
                timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired):
            return found
        if done.returncode:  # no engine answers: nothing of ours can run
            return found
        found += [f"{kind} {name}" for name in done.stdout.split()]
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else ".")
    left = leftover_processes(root)
    for pid, cmdline in left:
        print(f"left running: pid {pid}: {cmdline[:200]}")
    if not left:
        print(f"no process of {root.resolve()} is left")
    namespaces = leftover_namespaces()
    for name in namespaces:
        print(f"left behind: network namespace or link {name} (its test process is gone)")
    containers = leftover_containers()
    for name in containers:
        print(f"left behind: Docker {name} (docker compose down --volumes, or docker rm -f)")
    return 1 if left or namespaces or containers else 0


if __name__ == "__main__":
    sys.exit(main())
