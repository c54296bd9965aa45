"""Preflight: is a cluster's GMS and every DN set up the way the pipeline needs? (`cdc preflight`,
and `cdc start` before it starts anything: docs/deploy.md, "Preflight").

In the dumper, not in `cdc_equipment/checks/`: `cdc_equipment/checks/` is equipment (proofs against a ground truth, never
imported by the runtime: tests/test_layout.py), and these checks are part of starting the
runtime - `cdc start` refuses a DN set to STATEMENT with the same words `cdc preflight` prints.

Each node is asked once, over one bounded connection (`cdc.admin_sql`), for its settings, its
clock and the privileges of the configured user; `judge` (pure) turns those facts into one
`Problem` per wrong thing, each naming the node, the setting, what it is, what it must be and
the fix. A node that cannot be reached is reported as such, never as a wrong setting: `cdc
start` then starts anyway and waits for it (docs/faults.md), and checks nothing it could not
read.

What is checked, and why (docs/deploy.md has the table):
- on every DN, what MergeSource reads: `log_bin`, `binlog_format=ROW` (a statement-logged
  write carries no rows: it could not be renamed, split by shard or ordered by commit TSO),
  `binlog_row_image=FULL` (snapshot reads and the backfill rebuild rows from it),
  `binlog_row_metadata=FULL` (the commit records are parsed by column name),
  `binlog_checksum=CRC32` (the dump client verifies every event's CRC), and
  `log_slave_updates=ON` where the DN is itself a replica (else the writes it applies from its
  primary never reach its binlog);
- `server_id`s: unique over the GMS and the DNs, and none equal to a server_id the pipeline's
  dump connections register as (`[pipeline] dump_server_id_base` + DN id) or the dumper's own: a
  DN refuses a dump from its own server_id, and two dumps with one server_id kick each other;
- `gtid_domain_id`s: the pipeline reads DNs by file and position, so equal DN domains are only
  a warning (they matter to whoever replicates between DNs); with `[dumper] flavor = "mariadb"`
  the dumper's domain must differ from every DN's, so that a MariaDB server replicating from
  both keeps them apart;
- grants (information_schema's USER_PRIVILEGES and SCHEMA_PRIVILEGES of the configured user;
  privileges through roles are not seen): on a DN, REPLICATION SLAVE (the dump), BINLOG MONITOR
  alias REPLICATION CLIENT (`SHOW MASTER STATUS` after a DN restart), SELECT (snapshot reads,
  the backfill) and SELECT, INSERT, UPDATE, DELETE on `__cdc__` (the dumper's heartbeats,
  recovery, the purge of old commit records), CONNECTION ADMIN only warned about (recovery's
  KILL of another user's session holding a branch); on the GMS, the pipeline's metadata
  database (it creates and migrates its tables) and the CN catalogue's (the heartbeats take
  TSOs from its row and register an instance);
- clocks: the GMS's `NOW(6)` (the TSO's physical part) against this machine's and each DN's.
  Correctness never rests on clocks (the TSO is a counter in the GMS; the dumper lease uses the
  GMS's clock alone), but the lag `cdc status` and the metrics report is this machine's clock
  minus a TSO, and the DNs stamp the events consumers compute Seconds_Behind_Master from: past
  MAX_SKEW_MS (a second: NTP keeps hosts within milliseconds, so a second means no NTP) those
  figures are wrong by more than the pipeline's own end-to-end latency (docs/performance.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import pymysql

from cdc import admin_sql
from cdc.cn_protocol import schema as cn_schema
from cdc.config import Config, NodeConfig
from dumper.server.sql.variables import like_to_regex

CONNECT_TIMEOUT_S = 3.0  # a node that does not answer within this is unreachable, not wrong
READ_TIMEOUT_S = 10.0
MAX_SKEW_MS = 1000.0

# What MergeSource needs of every DN's binlog: (variable, required value, my.cnf line, SQL fix).
DN_SETTINGS = (
    ("log_bin", "ON", "log_bin=binlog", None),
    ("binlog_format", "ROW", "binlog_format=ROW", "SET GLOBAL binlog_format='ROW'"),
    ("binlog_row_image", "FULL", "binlog_row_image=FULL", "SET GLOBAL binlog_row_image='FULL'"),
    (
        "binlog_row_metadata",
        "FULL",
        "binlog_row_metadata=FULL",
        "SET GLOBAL binlog_row_metadata='FULL'",
    ),
    ("binlog_checksum", "CRC32", "binlog_checksum=CRC32", "SET GLOBAL binlog_checksum='CRC32'"),
)
VARIABLES = (
    "server_id",
    "gtid_domain_id",
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_checksum",
    "log_slave_updates",
    "version",
)
ACCESS_DENIED = (1044, 1045, 1698)  # the login itself refused: cdc.toml's user or password
BOOLEAN_VARIABLES = ("log_bin", "log_slave_updates")  # @@global.x answers 1 or 0


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong (`fail`), worth knowing (`warn`), or a node not reached (`unreachable`)."""

    node: str  # "dn1 (127.0.0.1:23401)"
    setting: str
    found: str
    expected: str
    fix: str
    severity: str = "fail"

    def line(self) -> str:
        head = {"fail": "", "warn": "warning: ", "unreachable": ""}[self.severity]
        return f"{head}{self.node}: {self.setting} is {self.found}, must be {self.expected}; fix: {self.fix}"


@dataclass(slots=True)
class NodeFacts:
    """What one node told us (or why it did not)."""

    name: str
    role: str  # "gms" | "dn"
    address: str
    error: str = ""  # not reached: why
    # reached, but the login was refused (wrong credentials): no refusal to wait out
    denied: bool = False
    # logged in, but its settings could not be read (not MariaDB 10.5+?)
    unreadable: bool = False
    variables: dict[str, str] = field(default_factory=dict)
    grantee: str = ""
    global_privileges: set[str] = field(default_factory=set)
    schema_privileges: list[tuple[str, str]] = field(default_factory=list)  # (pattern, priv)
    replica_of: list[str] = field(default_factory=list)  # its replication sources, if any
    clock_offset_ms: float = 0.0  # its NOW(6) minus this machine's clock at the query's midpoint
    rtt_ms: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.name} ({self.address})"

    def has(self, privilege: str, database: str | None = None) -> bool:
        """The user holds `privilege` globally, or on `database` (SCHEMA_PRIVILEGES patterns:
        `_` and `%` wildcards, `\\_` a literal underscore)."""
        if privilege in self.global_privileges or "ALL PRIVILEGES" in self.global_privileges:
            return True
        if database is None:
            return False
        return any(
            priv == privilege
            and like_to_regex(pattern).fullmatch(database)  # (a grant's db: a LIKE pattern)
            for pattern, priv in self.schema_privileges
        )


@dataclass(slots=True)
class Report:
    problems: list[Problem]
    nodes: list[NodeFacts]

    @property
    def failures(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "fail"]

    @property
    def unreachable(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "unreachable"]

    @property
    def ok(self) -> bool:
        return not self.failures and not self.unreachable

    def summary(self) -> str:
        reached = [n for n in self.nodes if not n.error]
        return (
            f"preflight: {len(reached)} of {len(self.nodes)} node(s) checked, "
            f"{len(self.failures)} problem(s), {len(self.unreachable)} unreachable, "
            f"{len([p for p in self.problems if p.severity == 'warn'])} warning(s)"
        )

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "problems": [asdict(p) | {"line": p.line()} for p in self.problems],
            "nodes": [
                {
                    "name": n.name,
                    "role": n.role,
                    "address": n.address,
                    "reached": not n.error,
                    "error": n.error,
                    "variables": n.variables,
                    "clock_offset_ms": round(n.clock_offset_ms, 1),
                    "rtt_ms": round(n.rtt_ms, 1),
                }
                for n in self.nodes
            ],
        }


def gather(node: NodeConfig, role: str, connect_timeout: float = CONNECT_TIMEOUT_S) -> NodeFacts:
    """Ask one node for its facts over one connection, bounded by `connect_timeout`."""
    facts = NodeFacts(node.name or f"{role}{node.id}", role, node.address)
    try:
        conn = admin_sql.connect(
            node.host,
            node.port,
            node.user,
            node.password,
            connect_timeout=connect_timeout,
            read_timeout=READ_TIMEOUT_S,
        )
    except admin_sql.UNREACHABLE as exc:
        facts.error = _reason(exc)
        facts.denied = bool(exc.args) and exc.args[0] in ACCESS_DENIED
        return facts
    try:
        with conn.cursor() as cur:
            before = time.time()
            cur.execute(
                "SELECT UNIX_TIMESTAMP(NOW(6)), CURRENT_USER(), "
                + ", ".join(f"@@global.{v}" for v in VARIABLES)
            )
            after = time.time()
            row = cur.fetchone()
            facts.rtt_ms = (after - before) * 1000
            facts.clock_offset_ms = (float(row[0]) - (before + after) / 2) * 1000
            user, _, host = str(row[1]).rpartition("@")
            facts.grantee = f"'{user}'@'{host}'"
            facts.variables = {v: _text(v, x) for v, x in zip(VARIABLES, row[2:], strict=True)}
            cur.execute(
                "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = %s",
                (facts.grantee,),
            )
            facts.global_privileges = {r[0] for r in cur.fetchall()}
            cur.execute(
                "SELECT TABLE_SCHEMA, PRIVILEGE_TYPE FROM information_schema.SCHEMA_PRIVILEGES "
                "WHERE GRANTEE = %s",
                (facts.grantee,),
            )
            facts.schema_privileges = [(r[0], r[1]) for r in cur.fetchall()]
            if role == "dn":
                try:
                    cur.execute("SHOW ALL SLAVES STATUS")
                    names = [d[0] for d in cur.description or ()]
                    at = names.index("Master_Host") if "Master_Host" in names else None
                    facts.replica_of = [
                        str(r[at]) if at is not None else "?" for r in cur.fetchall()
                    ]
                except pymysql.MySQLError:
                    pass  # no REPLICA MONITOR: whether it is a replica stays unknown
    except admin_sql.UNREACHABLE as exc:
        facts.error = _reason(exc)
    except pymysql.MySQLError as exc:  # answered, but not what a MariaDB 10.5+ answers
        facts.error, facts.unreadable = _reason(exc), True
    finally:
        admin_sql.close_now(conn)
    return facts


def _reason(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[0], int):
        return f"({args[0]}) {args[1]}"
    return str(exc) or type(exc).__name__


def _text(variable: str, value) -> str:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if variable in BOOLEAN_VARIABLES and str(value) in ("0", "1"):
        return "ON" if str(value) == "1" else "OFF"
    return "" if value is None else str(value)


def judge(cfg: Config, nodes: list[NodeFacts], max_skew_ms: float = MAX_SKEW_MS) -> list[Problem]:
    """Every problem the facts show (pure: tests feed it facts)."""
    problems: list[Problem] = []
    for n in nodes:
        if n.denied:
            problems.append(
                Problem(
                    n.label,
                    "login",
                    f"refused ({n.error})",
                    "accepted for the user and password of cdc.toml",
                    f'CREATE USER and GRANT on the server (docs/deploy.md, "Users and grants"), '
                    f"or correct user/password of {'[gms]' if n.role == 'gms' else '[[dn]]'} in cdc.toml",
                )
            )
        elif n.unreadable:
            problems.append(
                Problem(
                    n.label,
                    "settings",
                    f"unreadable ({n.error})",
                    "readable: MariaDB 10.5 or later (binlog_row_metadata)",
                    "run MariaDB 10.11 (docs/deploy.md)",
                )
            )
        elif n.error:
            problems.append(
                Problem(
                    n.label,
                    "connection",
                    f"not possible ({n.error})",
                    "reachable with the user and password of cdc.toml",
                    "start the server, or correct host/port/user/password in cdc.toml",
                    "unreachable",
                )
            )
    reached = [n for n in nodes if not n.error]
    for n in reached:
        if n.role == "dn":
            problems += _dn_settings(n)
        problems += _grants(cfg, n)
    problems += _server_ids(cfg, reached)
    problems += _domains(cfg, reached)
    problems += _clocks(reached, max_skew_ms)
    return problems


def _dn_settings(n: NodeFacts) -> Iterable[Problem]:
    v = n.variables
    for name, want, cnf, sql in DN_SETTINGS:
        have = v.get(name, "")
        if have.upper() != want:
            how = f"'{cnf}' under [mariadbd] in my.cnf" + (
                f" (now: {sql}; running sessions keep the old value)"
                if sql
                else ", then restart the server"
            )
            yield Problem(n.label, name, have or "unset", want, how)
    if n.replica_of and v.get("log_slave_updates", "").upper() != "ON":
        yield Problem(
            n.label,
            "log_slave_updates",
            f"{v.get('log_slave_updates') or 'unset'} on a replica of {', '.join(n.replica_of)}",
            "ON (the writes it applies from its primary must reach its binlog)",
            "'log_slave_updates=ON' under [mariadbd] in my.cnf, then restart the server",
        )


def _grants(cfg: Config, n: NodeFacts) -> Iterable[Problem]:
    def need(
        privilege: str, database: str | None, why: str, grant_on: str, severity: str = "fail"
    ) -> Problem | None:
        if n.has(privilege, database):
            return None
        on = f"on {database}" if database else "(global)"
        return Problem(
            n.label,
            f"grant {privilege} {on} for {n.grantee}",
            "missing",
            f"held ({why})",
            f"GRANT {privilege} ON {grant_on} TO {n.grantee};",
            severity,
        )

    if n.role == "dn":
        private = cn_schema.PRIVATE_DB
        wanted = [
            ("REPLICATION SLAVE", None, "the binlog dump", "*.*"),
            ("BINLOG MONITOR", None, "SHOW MASTER STATUS after a DN restart", "*.*"),
            ("SELECT", None, "snapshot reads and the backfill read every shard", "*.*"),
        ] + [
            (
                p,
                private,
                "the dumper's heartbeats (upserts), recovery's records and tombstones, the purge",
                f"`{private}`.*",
            )
            for p in ("SELECT", "INSERT", "UPDATE", "DELETE")
        ]
        # Recovery ends a session that holds a CN branch for ever (KILL CONNECTION, xid.py):
        # another user's needs this; a warning, since the CN may run as this same user.
        problem = need(
            "CONNECTION ADMIN",
            None,
            "recovery ends a session of another user holding a prepared branch",
            "*.*",
            "warn",
        )
        if problem is not None:
            yield problem
    else:
        meta, catalogue = cfg.pipeline.meta_database, cfg.cn.catalogue_database
        wanted = [
            (p, meta, "the pipeline's metadata: created and migrated at start", f"`{meta}`.*")
            for p in ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "INDEX")
        ] + [
            (
                p,
                catalogue,
                "heartbeats take TSOs and register an instance; the catalogue is read",
                f"`{catalogue}`.*",
            )
            for p in ("SELECT", "INSERT", "UPDATE")
        ]
    for privilege, database, why, grant_on in wanted:
        problem = need(privilege, database, why, grant_on)
        if problem is not None:
            yield problem


def _server_ids(cfg: Config, nodes: list[NodeFacts]) -> Iterable[Problem]:
    by_id: dict[str, list[NodeFacts]] = {}
    for n in nodes:
        by_id.setdefault(n.variables.get("server_id", ""), []).append(n)
    dump_ids = {cfg.pipeline.dump_server_id_base + d.id: d.name or f"dn{d.id}" for d in cfg.dn}
    for sid, same in sorted(by_id.items()):
        if len(same) > 1:
            yield Problem(
                ", ".join(n.label for n in same),
                "server_id",
                f"{sid} on each",
                "unique over the GMS and every DN",
                f"'server_id=N' (a different N each) under [mariadbd] in my.cnf, or "
                f"SET GLOBAL server_id=N on all but {same[0].name}",
            )
        for n in same:
            clash = (
                f"the server_id the pipeline's dump of {dump_ids[int(sid)]} registers as "
                "([pipeline] dump_server_id_base + DN id)"
                if sid.isdigit() and int(sid) in dump_ids
                else "the dumper's [dumper] server_id"
                if sid.isdigit() and int(sid) == cfg.dumper.server_id
                else "0 (binary logging refuses replicas)"
                if sid == "0"
                else None
            )
            if clash:
                yield Problem(
                    n.label,
                    "server_id",
                    f"{sid}, {clash}",
                    "another value",
                    "'server_id=N' under [mariadbd] in my.cnf (or SET GLOBAL server_id=N), "
                    "or change [pipeline] dump_server_id_base / [dumper] server_id in cdc.toml",
                )


def _domains(cfg: Config, nodes: list[NodeFacts]) -> Iterable[Problem]:
    dns = [n for n in nodes if n.role == "dn"]
    by_domain: dict[str, list[NodeFacts]] = {}
    for n in dns:
        by_domain.setdefault(n.variables.get("gtid_domain_id", ""), []).append(n)
    for domain, same in sorted(by_domain.items()):
        if len(same) > 1:
            yield Problem(
                ", ".join(n.label for n in same),
                "gtid_domain_id",
                f"{domain} on each",
                "unique if these DNs ever replicate to one server (the pipeline reads by "
                "file and position and does not need it)",
                "'gtid_domain_id=N' (a different N each) under [mariadbd] in my.cnf",
                "warn",
            )
    if cfg.dumper.flavor == "mariadb":
        for domain, same in by_domain.items():
            if domain == str(cfg.dumper.gtid_domain_id):
                yield Problem(
                    ", ".join(n.label for n in same),
                    "gtid_domain_id",
                    f"{domain}, the dumper's [dumper] gtid_domain_id",
                    "different from the dumper's (a MariaDB server replicating from both "
                    "would mix their GTID sequences)",
                    "another [dumper] gtid_domain_id in cdc.toml, or 'gtid_domain_id=N' in "
                    "the DN's my.cnf",
                )


def _clocks(nodes: list[NodeFacts], max_skew_ms: float) -> Iterable[Problem]:
    gms = next((n for n in nodes if n.role == "gms"), None)
    if gms is None:
        return  # the TSO's clock was not read: nothing to compare with
    # An offset is known to within half the query's round trip: only skew beyond that counts.
    if abs(gms.clock_offset_ms) - gms.rtt_ms / 2 > max_skew_ms:
        yield Problem(
            gms.label,
            "clock",
            f"{gms.clock_offset_ms:+.0f} ms from this machine's",
            f"within {max_skew_ms:.0f} ms (the TSO is the GMS's clock; lag figures use this "
            "machine's)",
            "run NTP (chrony, systemd-timesyncd) on both hosts",
        )
    for n in nodes:
        if n.role != "dn":
            continue
        skew = n.clock_offset_ms - gms.clock_offset_ms
        if abs(skew) - (n.rtt_ms + gms.rtt_ms) / 2 > max_skew_ms:
            yield Problem(
                n.label,
                "clock",
                f"{skew:+.0f} ms from the GMS's (the TSO's)",
                f"within {max_skew_ms:.0f} ms (its event timestamps beside the TSO)",
                "run NTP (chrony, systemd-timesyncd) on both hosts",
            )


def preflight(
    cfg: Config, connect_timeout: float = CONNECT_TIMEOUT_S, max_skew_ms: float = MAX_SKEW_MS
) -> Report:
    """Check the GMS and every DN of `cfg` at once (one thread per node: each waits on the
    network)."""
    targets = [(cfg.gms, "gms"), *((d, "dn") for d in cfg.dn)]
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        nodes = list(pool.map(lambda t: gather(t[0], t[1], connect_timeout), targets))
    return Report(judge(cfg, nodes, max_skew_ms), nodes)
