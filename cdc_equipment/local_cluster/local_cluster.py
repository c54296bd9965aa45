"""A local cluster: one GMS (meta database) and N DNs as MariaDB processes on loopback ports.

State lives in one directory: `cluster.json` (the nodes), one sub-directory per node and the
generated `cdc.toml`. Every operation is idempotent: `up` reuses running nodes and restarts
stopped ones; `down` stops by pid whatever it started.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from cdc.config import (
    ClusterConfig,
    Config,
    ConfigError,
    DumperConfig,
    DumperPeer,
    DumperUser,
    NodeConfig,
)
from cdc.config import load as load_config
from cdc.protocol.auth import caching_sha2_digest, native_hash
from cdc_equipment.local_cluster.mariadb_server import (
    MariadbServer,
    NodeStatus,
    ServerError,
    install_datadir,
    port_is_free,
)

DEFAULT_BASE_PORT = 23400
# The dumper (global binlog server) listens on base + 50 (HA peer i on base + 49 + i; with
# `streams` > 1 each dumper takes streams + 1 ports, its own then one per stream, so peer i is
# on base + 50 + (i - 1) * (streams + 1)); DN i is on base + i; replica i (a downstream of the
# dumper) on base + 60 + i.
DUMPER_PORT_OFFSET = 50
REPLICA_PORT_OFFSET = 60
REPLICA_SERVER_ID_BASE = 500
# The replication user written into a new cdc.toml (change it there for anything but a demo).
DEFAULT_USER = "repl"
DEFAULT_PASSWORD = "repl"
GMS_SERVER_ID = 1000
STATE_FILE = "cluster.json"
CONFIG_FILE = "cdc.toml"


def dumper_ports(streams: int) -> int:
    """The ports one dumper listens on: its own, then one per stream when there are several
    (stream i on its port + 1 + i)."""
    return streams + 1 if streams > 1 else 1


class ClusterError(RuntimeError):
    """A cluster operation was refused or failed; the message says what to do."""


@dataclass(slots=True)
class NodeSpec:
    name: str
    role: str
    port: int
    server_id: int
    dn_id: int = 0
    # On a host of its own (cdc_equipment/local_cluster/hosts.py): its address and network namespace.
    host: str = "127.0.0.1"
    netns: str = ""

    def saved(self) -> dict:
        """Its entry in cluster.json: the placement only when it is not the default one."""
        out = asdict(self)
        if not self.netns and self.host == "127.0.0.1":
            del out["host"], out["netns"]
        return out


class LocalCluster:
    def __init__(self, directory: str | Path):
        self.dir = Path(directory).absolute()
        self.nodes: list[NodeSpec] = []
        self.base_port = DEFAULT_BASE_PORT
        self.dumpers = 1  # > 1: that many HA dumper peers in cdc.toml
        self.streams = 1  # > 1: `[dumper] streams` in cdc.toml (docs/streams.md)
        if self.state_file.exists():
            self._load_state()

    # -- state ------------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.dir / STATE_FILE

    @property
    def config_file(self) -> Path:
        return self.dir / CONFIG_FILE

    @property
    def exists(self) -> bool:
        return bool(self.nodes)

    def _load_state(self) -> None:
        try:
            state = json.loads(self.state_file.read_text())
            self.base_port = int(state["base_port"])
            self.dumpers = int(state.get("dumpers", 1))
            self.streams = int(state.get("streams", 1))
            self.nodes = [NodeSpec(**n) for n in state["nodes"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ClusterError(
                f"{self.state_file}: unreadable cluster state ({exc}); remove the directory"
            ) from None

    def _save_state(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "base_port": self.base_port,
                    "dumpers": self.dumpers,
                    "streams": self.streams,
                    "nodes": [n.saved() for n in self.nodes],
                },
                indent=2,
            )
        )
        tmp.replace(self.state_file)

    def server(self, spec: NodeSpec) -> MariadbServer:
        return MariadbServer(
            spec.name,
            spec.role,
            self.dir / spec.name,
            spec.port,
            spec.server_id,
            host=spec.host,
            netns=spec.netns,
        )

    @property
    def gms(self) -> MariadbServer:
        return self.server(next(n for n in self.nodes if n.role == "gms"))

    @property
    def dns(self) -> list[MariadbServer]:
        return [self.server(n) for n in self.nodes if n.role == "dn"]

    def dn(self, dn_id: int) -> MariadbServer:
        for n in self.nodes:
            if n.role == "dn" and n.dn_id == dn_id:
                return self.server(n)
        raise ClusterError(f"no DN {dn_id} in {self.dir}")

    def servers(self) -> list[MariadbServer]:
        return [self.server(n) for n in self.nodes]

    # -- operations ---------------------------------------------------------------------------
    def up(
        self,
        dns: int = 3,
        base_port: int | None = None,
        dumpers: int = 1,
        streams: int = 1,
        hosts: Mapping | None = None,
    ) -> Config:
        """Start GMS + `dns` DNs (reusing running ones); write `cdc.toml`, listing `dumpers`
        HA dumper peers when more than one, each with `streams` binlog streams; return the
        config. `hosts`: node name ("gms", "dn1", …) → the host it runs on (a
        cdc_equipment.local_cluster.hosts.Host: its namespace and address), for a new cluster's nodes;
        the others run here on 127.0.0.1."""
        if dns < 1:
            raise ClusterError(f"--dns must be at least 1 (got {dns})")
        if not 1 <= dumpers < REPLICA_PORT_OFFSET - DUMPER_PORT_OFFSET:
            raise ClusterError(f"--dumpers must be 1..9 (got {dumpers})")
        if streams < 1:
            raise ClusterError(f"--streams must be at least 1 (got {streams})")
        if dumpers * dumper_ports(streams) > REPLICA_PORT_OFFSET - DUMPER_PORT_OFFSET:
            raise ClusterError(
                f"--dumpers {dumpers} with --streams {streams} need "
                f"{dumpers * dumper_ports(streams)} ports from base+{DUMPER_PORT_OFFSET} "
                f"(each dumper its own and one per stream); only "
                f"{REPLICA_PORT_OFFSET - DUMPER_PORT_OFFSET} are kept before the replicas'"
            )
        if not self.exists:
            self.dumpers, self.streams = dumpers, streams
            self.base_port = base_port if base_port is not None else DEFAULT_BASE_PORT
            if not 1024 <= self.base_port <= 65535 - dns - 16:
                raise ClusterError(
                    f"--base-port {self.base_port} is out of range (1024..{65535 - dns - 16})"
                )
            self.nodes = [NodeSpec("gms", "gms", self.base_port, GMS_SERVER_ID)]
            self.nodes += [
                NodeSpec(f"dn{i}", "dn", self.base_port + i, i, i) for i in range(1, dns + 1)
            ]
            for n in self.nodes:
                if hosts and n.name in hosts:
                    n.host, n.netns = hosts[n.name].address, hosts[n.name].netns
            # (a host's ports are its own)
            busy = [n.port for n in self.nodes if not n.netns and not port_is_free(n.port)]
            if busy:
                self.nodes = []
                raise ClusterError(f"port(s) {busy} already in use; choose another --base-port")
            self._save_state()
        elif base_port is not None and base_port != self.base_port:
            raise ClusterError(
                f"{self.dir} already holds a cluster on base port {self.base_port}; "
                f"run `cdc cluster down --dir {self.dir}` and remove it to change ports"
            )
        elif dumpers != self.dumpers and dumpers != 1:
            raise ClusterError(
                f"{self.dir} already holds a cluster with {self.dumpers} dumper(s); "
                "edit [[dumper.peers]] in its cdc.toml to change them"
            )
        elif streams != self.streams and streams != 1:
            raise ClusterError(
                f"{self.dir} already holds a cluster with {self.streams} stream(s); edit "
                "[dumper] streams and the [[dumper.peers]] ports in its cdc.toml to change them"
            )
        current = len(self.dns)
        for _ in range(current, dns):
            self._add_dn_spec()
        self._start_all()
        return self.write_config()

    def add_dn(self) -> NodeSpec:
        """Start one more DN (for scale-out); returns its spec."""
        if not self.exists:
            raise ClusterError(f"no cluster in {self.dir}; run `cdc cluster up` first")
        spec = self._add_dn_spec()
        self._start_all()
        self.write_config()
        return spec

    @property
    def replicas(self) -> list[MariadbServer]:
        return [self.server(n) for n in self.nodes if n.role == "replica"]

    def add_replica(self) -> MariadbServer:
        """A downstream MariaDB server (not part of the source cluster); started, not attached."""
        if not self.exists:
            raise ClusterError(f"no cluster in {self.dir}; run `cdc cluster up` first")
        i = len(self.replicas) + 1
        port = self.base_port + REPLICA_PORT_OFFSET + i
        if not port_is_free(port):
            raise ClusterError(f"port {port} for replica{i} is already in use")
        self.nodes.append(NodeSpec(f"replica{i}", "replica", port, REPLICA_SERVER_ID_BASE + i))
        self._save_state()
        self._start_all()
        return self.replicas[-1]

    def _add_dn_spec(self) -> NodeSpec:
        dn_id = max((n.dn_id for n in self.nodes if n.role == "dn"), default=0) + 1
        port = self.base_port + dn_id
        if any(n.port == port for n in self.nodes) or not port_is_free(port):
            raise ClusterError(f"port {port} for dn{dn_id} is already in use")
        spec = NodeSpec(f"dn{dn_id}", "dn", port, dn_id, dn_id)
        self.nodes.append(spec)
        self._save_state()
        return spec

    def _template(self) -> Path:
        """One install-db for the whole cluster; each node copies it (install-db costs ~0.5 s)."""
        template = self.dir / "template" / "data"
        if not template.exists():
            install_datadir(template, self.dir / "template" / "install-db.log")
        return template

    def _start_all(self) -> None:
        servers = self.servers()
        stopped = [s for s in servers if not s.is_running()]
        if not stopped:
            return
        template = self._template() if any(not s.datadir.exists() for s in stopped) else None
        for s in stopped:
            s.initialise(template)
        errors = []
        with ThreadPoolExecutor(max_workers=len(stopped)) as pool:
            for s, fut in [(s, pool.submit(s.start)) for s in stopped]:
                try:
                    fut.result()
                except ServerError as exc:
                    errors.append(f"{s.name}: {exc}")
        if errors:
            raise ClusterError("; ".join(errors))

    def down(self) -> list[str]:
        """Stop every node this cluster started; returns the names of those that were running."""
        running = [s for s in self.servers() if s.is_running()]
        with ThreadPoolExecutor(max_workers=max(1, len(running))) as pool:
            list(pool.map(lambda s: s.stop(), running))
        return [s.name for s in running]

    def status(self) -> list[NodeStatus]:
        with ThreadPoolExecutor(max_workers=max(1, len(self.nodes))) as pool:
            return list(pool.map(lambda s: s.status(), self.servers()))

    def config(self) -> Config:
        gms = self.gms
        span = dumper_ports(self.streams)
        dumper = DumperConfig(
            port=self.base_port + DUMPER_PORT_OFFSET,
            streams=self.streams,
            binlog_dir=str(self.dir / "global-binlog"),
            users=[
                DumperUser(
                    DEFAULT_USER,
                    native_hash(DEFAULT_PASSWORD),
                    caching_sha2_digest(DEFAULT_PASSWORD),
                    replication=True,
                    admin=True,
                    # Reads logical tables too (docs/snapshot-reads.md): `mariadb-dump` of the
                    # dumper, a replica's initial copy, work without editing cdc.toml.
                    select=True,
                )
            ],
            # HA followers copy the leader's files as this user (docs/dumper.md).
            peer_user=DEFAULT_USER,
            peer_password=DEFAULT_PASSWORD,
            peers=[
                DumperPeer(
                    i,
                    port=self.base_port + DUMPER_PORT_OFFSET + (i - 1) * span,
                    binlog_dir=str(self.dir / f"dumper{i}" / "global-binlog"),
                )
                for i in range(1, self.dumpers + 1)
            ]
            if self.dumpers > 1
            else [],
        )
        return Config(
            dumper=dumper,
            cluster=ClusterConfig(dir=str(self.dir)),
            gms=NodeConfig(id=0, host=gms.host, port=gms.port, server_id=gms.server_id, name="gms"),
            dn=[
                NodeConfig(id=n.dn_id, host=n.host, port=n.port, server_id=n.server_id, name=n.name)
                for n in self.nodes
                if n.role == "dn"
            ],
        )

    def write_config(self) -> Config:
        """Write `cdc.toml`; sections other than the nodes keep what the user put there."""
        cfg = self.config()
        if self.config_file.exists():
            try:
                old = load_config(self.config_file)
            except ConfigError as exc:
                raise ClusterError(
                    f"{exc}; fix or remove it, then run `cdc cluster up` again"
                ) from None
            cfg = dataclasses.replace(old, cluster=cfg.cluster, gms=cfg.gms, dn=cfg.dn)
        cfg.dump(self.config_file)
        return cfg
