"""`cdc cluster up|status|down|add-dn`: the local MariaDB cluster."""

from __future__ import annotations

import argparse
import time

from cdc_equipment.local_cluster import LocalCluster
from cdc_equipment.local_cluster.local_cluster import DEFAULT_BASE_PORT

DEFAULT_DIR = "var/cluster"


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="local MariaDB cluster: GMS + DNs on loopback ports")
    csub = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    up = csub.add_parser("up", help="start GMS + N DNs (idempotent) and write cdc.toml")
    up.add_argument("--dns", type=positive_int, default=3, help="number of DNs (default 3)")
    up.add_argument(
        "--base-port",
        type=int,
        default=None,
        help=f"GMS port; DN i gets base+i (default {DEFAULT_BASE_PORT})",
    )
    up.add_argument(
        "--dumpers",
        type=positive_int,
        default=1,
        help="HA: list this many dumper peers in cdc.toml (`cdc start --dumper-id N`)",
    )
    up.add_argument(
        "--streams",
        type=positive_int,
        default=1,
        help="[dumper] streams in cdc.toml (docs/streams.md); each dumper peer then takes "
        "streams + 1 ports",
    )
    up.set_defaults(func=cmd_up)

    for name, func, text in (
        ("status", cmd_status, "role, pid, port, binlog position, up/down of each node"),
        ("down", cmd_down, "stop every node this cluster started"),
        ("add-dn", cmd_add_dn, "start one more DN (scale-out)"),
    ):
        c = csub.add_parser(name, help=text)
        c.set_defaults(func=func)
    for c in csub.choices.values():
        c.add_argument(
            "--dir", default=DEFAULT_DIR, help=f"cluster state directory (default {DEFAULT_DIR})"
        )


def cmd_up(args) -> int:
    cluster = LocalCluster(args.dir)
    started = time.monotonic()
    cfg = cluster.up(
        dns=args.dns, base_port=args.base_port, dumpers=args.dumpers, streams=args.streams
    )
    print(
        f"cluster up in {time.monotonic() - started:.1f}s: GMS {cfg.gms.address}, "
        f"DNs {', '.join(d.address for d in cfg.dn)}"
    )
    n = cfg.dumper.streams
    for peer in cfg.dumper.peers:
        streams = f" (streams on {peer.port + 1}..{peer.port + n})" if n > 1 else ""
        print(
            f"dumper peer {peer.id}: {cfg.dumper.host}:{peer.port}{streams}, "
            f"files in {peer.binlog_dir}"
        )
    print(f"config: {cluster.config_file}")
    return 0


def cmd_status(args) -> int:
    cluster = LocalCluster(args.dir)
    if not cluster.exists:
        print(f"no cluster in {cluster.dir}")
        return 1
    rows = [
        ("NODE", "ROLE", "PORT", "PID", "STATE", "LOG_BIN", "FORMAT", "BINLOG FILE", "POSITION")
    ]
    for st in cluster.status():
        rows.append(
            (
                st.name,
                st.role,
                str(st.port),
                str(st.pid or "-"),
                "up" if st.up else "down",
                st.log_bin or "-",
                st.binlog_format or "-",
                st.binlog_file or "-",
                "-" if st.binlog_position is None else str(st.binlog_position),
            )
        )
    print_table(rows)
    return 0


def cmd_down(args) -> int:
    cluster = LocalCluster(args.dir)
    stopped = cluster.down()
    print(f"stopped {', '.join(stopped)}" if stopped else "nothing running")
    return 0


def cmd_add_dn(args) -> int:
    cluster = LocalCluster(args.dir)
    spec = cluster.add_dn()
    print(
        f"started {spec.name} on 127.0.0.1:{spec.port} (server_id {spec.server_id}); config updated"
    )
    return 0


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
