#!/opt/cdc/venv/bin/python
"""The service image's entry point (deploy/docker/cdc.Dockerfile; docs/deploy.md, "Containers").

Every container of the image first settles its configuration in its state directory,
/var/lib/cdc/cdc.toml (the working directory, so `docker compose exec cdc cdc status` needs no
--config): a copy of the cdc.toml mounted at $CDC_CONFIG (default /etc/cdc/cdc.toml), else one
made from CDC_* environment variables, else it stops, saying what is missing. Then:

  serve       (the default) `cdc preflight`'s checks, then the pipeline and the dumper in the
              foreground under the project's supervisor (cdc_cli/supervise.py: a crash of the
              service is restarted inside the container; SIGTERM stops it cleanly). A wrong
              setting, a missing or bad config exits 2 at once: compose and `docker run` show
              the message instead of a container restarted in a loop.
  health      the HEALTHCHECK: the service runs and rewrote its status in the last 15 s.
  anything else is run as a command (`cdc cn init`, `cdc workload transfer ...`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

STATE = Path(os.environ.get("CDC_STATE_DIR", "/var/lib/cdc"))
CONFIG = STATE / "cdc.toml"
MOUNTED = Path(os.environ.get("CDC_CONFIG", "/etc/cdc/cdc.toml"))
HEALTHY_STATUS_AGE_S = 15.0
BAD_SETUP = 2  # not 1: a refusal at start is told apart from a crash of the service

ENV_HELP = """\
  CDC_GMS=HOST:PORT              the GMS (required)
  CDC_DNS=HOST:PORT,HOST:PORT    the DNs, ids 1, 2, ... in this order (required)
  CDC_DB_USER, CDC_DB_PASSWORD   the user of the GMS and DNs (default root, no password)
  CDC_DUMPER_PORT                the dumper's MySQL port in the container (default 3307)
  CDC_DUMPER_USER, CDC_DUMPER_PASSWORD
                                 its user: replication, reads of tables (default repl/repl)
  CDC_PEERS=ID@HOST:PORT,...     HA: every dumper container; CDC_DUMPER_ID: which one this is
  CDC_GROUND_TRUTH=FILE          the reference CN logs its commits there (`cdc verify-binlog`)"""


def fail(message: str) -> None:
    print(f"cdc container: {message}", file=sys.stderr, flush=True)
    sys.exit(BAD_SETUP)


def host_port(value: str, name: str) -> tuple[str, int]:
    host, _, port = value.strip().rpartition(":")
    if not host or not port.isdigit():
        fail(f"{name}={value!r}: expected HOST:PORT")
    return host, int(port)


def config_from_environment():
    from cdc.config import Config, DumperConfig, DumperPeer, DumperUser, NodeConfig
    from cdc.protocol.auth import caching_sha2_digest, native_hash

    env = os.environ
    missing = [name for name in ("CDC_GMS", "CDC_DNS") if not env.get(name)]
    if missing:
        fail(
            f"no configuration: no file at {MOUNTED} and {' and '.join(missing)} not set.\n"
            f"Mount a cdc.toml there (-v ./cdc.toml:{MOUNTED}:ro) or set:\n{ENV_HELP}"
        )
    user, password = env.get("CDC_DB_USER", "root"), env.get("CDC_DB_PASSWORD", "")

    def node(i: int, address: str, name: str, var: str) -> NodeConfig:
        host, port = host_port(address, var)
        return NodeConfig(i, host, port, user, password, name=name)

    dns = [a for a in env["CDC_DNS"].split(",") if a.strip()]
    dumper_user = env.get("CDC_DUMPER_USER", "repl")
    dumper_password = env.get("CDC_DUMPER_PASSWORD", "repl")
    peers = []
    for entry in filter(None, env.get("CDC_PEERS", "").split(",")):
        ident, _, address = entry.partition("@")
        host, port = host_port(address, "CDC_PEERS")
        if not ident.isdigit():
            fail(f"CDC_PEERS entry {entry!r}: expected ID@HOST:PORT")
        # Each peer's copy of the global binlog lives on its own volume, at the same path.
        peers.append(DumperPeer(int(ident), host, port, binlog_dir=str(STATE / "binlog")))
    cfg = Config(
        gms=node(0, env["CDC_GMS"], "gms", "CDC_GMS"),
        dn=[node(i, a, f"dn{i}", "CDC_DNS") for i, a in enumerate(dns, 1)],
        dumper=DumperConfig(
            # Every interface of the container: its port is published or read on the network.
            host="0.0.0.0",
            port=int(env.get("CDC_DUMPER_PORT", "3307")),
            binlog_dir=str(STATE / "binlog"),
            users=[
                DumperUser(
                    dumper_user,
                    native_hash(dumper_password),
                    caching_sha2_digest(dumper_password),
                    replication=True,
                    admin=True,
                    select=True,
                )
            ],
            peer_user=dumper_user,
            peer_password=dumper_password,
            peers=peers,
        ),
    )
    cfg.cluster.dir = str(STATE / "cluster")
    cfg.cn.ground_truth_log = env.get("CDC_GROUND_TRUTH", "")
    return cfg


def settle_config():
    """/var/lib/cdc/cdc.toml from the mounted file or the environment; checked by loading it."""
    from cdc.config import ConfigError, load

    try:
        if MOUNTED.is_file():
            shutil.copyfile(MOUNTED, CONFIG)
        elif MOUNTED.exists():
            fail(f"{MOUNTED} is not a file (a directory mounted in its place?)")
        else:
            config_from_environment().dump(CONFIG)
        return load(CONFIG)
    except ConfigError as exc:
        fail(f"bad configuration: {exc}")
    except PermissionError as exc:
        fail(f"{exc.filename}: not readable or writable by user {os.getuid()} ({exc.strerror})")


def dumper_id() -> int:
    return int(os.environ.get("CDC_DUMPER_ID", "0") or 0)


def serve(cfg) -> int:
    from cdc_cli.commands.pipeline import load_for, start
    from cdc_cli.commands.preflight import PreflightRefused, refuse_wrong_settings

    try:
        refuse_wrong_settings(load_for(str(CONFIG), dumper_id()))
    except PreflightRefused as exc:
        fail(str(exc))
    # The checks ran: the supervised service does not repeat them at every restart.
    return start(str(CONFIG), dumper_id=dumper_id(), supervise=True, preflight=False)


def health() -> int:
    from cdc_cli.commands.pipeline import state_dir

    status = state_dir(str(CONFIG), dumper_id()) / "status.json"
    try:
        age = time.time() - json.loads(status.read_text())["written_at"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"no status yet ({exc})")
        return 1
    print(f"status {age:.1f}s old")
    return 0 if age < HEALTHY_STATUS_AGE_S else 1


def main(argv: list[str]) -> int:
    os.chdir(STATE)
    command = argv or ["serve"]
    if command == ["health"]:
        return health()
    cfg = settle_config()
    if command == ["serve"]:
        import logging

        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        return serve(cfg)
    os.execvp(command[0], command)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
