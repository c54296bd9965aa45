"""`cdc demo`: what `make demo` runs. For now: the cluster, and how to connect to it."""

from __future__ import annotations

import argparse

from cdc.cluster import LocalCluster
from cdc.commands.cluster import print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="start the demo cluster and print how to connect")
    p.add_argument("--dir", default="var/demo")
    p.add_argument("--dns", type=int, default=3)
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    cluster = LocalCluster(args.dir)
    cfg = cluster.up(dns=args.dns)
    rows = [("NODE", "ROLE", "ADDRESS", "CONNECT WITH")]
    for st in cluster.status():
        rows.append(
            (st.name, st.role, f"127.0.0.1:{st.port}", f"mariadb -h127.0.0.1 -P{st.port} -uroot")
        )
    print_table(rows)
    print(f"\nconfig written to {cluster.config_file} ({len(cfg.dn)} DNs)")
    print(f"stop everything with: make stop   (or: cdc cluster down --dir {args.dir})")
    return 0
