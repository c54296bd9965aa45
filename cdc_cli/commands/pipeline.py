"""`cdc start|stop|status`: the pipeline (MergeSources → MergeJoint → Dumper leader + server).

`start` runs in the foreground, or with `--background` as a detached supervisor
(`cdc_cli/supervise.py`) that runs it and starts it again after a crash; pids and the log live next
to the binlog directory; `status` reads the status file the running leader rewrites every second.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cdc.config import Config, ConfigError, load
from cdc_cli.commands.options import add_config_argument
from cdc_cli.supervise import PID_FILE as SUPERVISOR_PID
from cdc_cli.supervise import read_state
from cdc_equipment.processes import PidFile

PIPELINE_PID = "pipeline.pid"


def register(sub: argparse._SubParsersAction) -> None:
    start = sub.add_parser(
        "start", help="run the pipeline and the dumper (foreground or --background)"
    )
    start.add_argument(
        "--background", action="store_true", help="detach; log to <state dir>/pipeline.log"
    )
    # (what --background runs: the supervisor of the foreground service)
    start.add_argument("--supervise", action="store_true", help=argparse.SUPPRESS)
    start.add_argument(
        "--skip-preflight",
        action="store_true",
        help="start even if `cdc preflight` finds wrong settings (not advised)",
    )
    start.set_defaults(func=cmd_start)
    stop = sub.add_parser("stop", help="stop a pipeline started with --background")
    stop.set_defaults(func=cmd_stop)
    status = sub.add_parser("status", help="per-DN position and watermark, global TSO, lag, rate")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    for p in (start, stop, status):
        add_config_argument(p)
        p.add_argument(
            "--dumper-id",
            type=int,
            default=0,
            help="HA: which [[dumper.peers]] entry this process is (required when peers are listed)",
        )


def load_for(config_path: str, dumper_id: int) -> Config:
    """The configuration as run by this process: with HA peers, peer `dumper_id`'s."""
    cfg = load(config_path)
    if cfg.dumper.peers and not dumper_id:
        raise ConfigError(
            f"{config_path} lists [[dumper.peers]] (HA): pass --dumper-id "
            f"(one of {[p.id for p in cfg.dumper.peers]})"
        )
    return cfg.for_dumper(dumper_id) if dumper_id else cfg


def state_dir(config_path: str, dumper_id: int = 0) -> Path:
    cfg = load_for(config_path, dumper_id)
    path = Path(cfg.dumper.binlog_dir)
    if not path.is_absolute():
        path = Path(config_path).absolute().parent / path
    return path.parent / (f"pipeline-{dumper_id}" if dumper_id else "pipeline")


def cmd_start(args) -> int:
    return start(
        args.config,
        background=args.background,
        dumper_id=args.dumper_id,
        supervise=args.supervise,
        preflight=not args.skip_preflight,
    )


def start(
    config_path: str,
    background: bool = False,
    dumper_id: int = 0,
    supervise: bool = False,
    preflight: bool = True,
) -> int:
    """`cdc start`: the pipeline in this process, or detached and supervised with
    `background` (`supervise`: be that supervisor). `preflight`: first refuse a GMS or DN set
    up wrong, in `cdc preflight`'s words (cdc_cli/commands/preflight.py); an unreachable one is no
    refusal (the pipeline waits for it)."""
    directory = state_dir(config_path, dumper_id)
    directory.mkdir(parents=True, exist_ok=True)
    pid_file = PidFile(directory / PIPELINE_PID)
    service = (
        [sys.executable, "-m", "cdc_cli.main", "start", "--config", config_path]
        + (["--dumper-id", str(dumper_id)] if dumper_id else [])
        + ([] if preflight else ["--skip-preflight"])
    )
    if supervise:
        from cdc_cli.supervise import supervise as run_supervisor

        return run_supervisor(service, directory)
    for file in (PidFile(directory / SUPERVISOR_PID), pid_file):
        running = file.running()
        if running is not None and running.pid != os.getppid():  # (ours: we run)
            print(f"already running (pid {running.pid})")
            return 0
    if preflight:
        from cdc_cli.commands.preflight import refuse_wrong_settings

        # Before --background detaches: the refusal reaches the terminal, not only the log.
        refuse_wrong_settings(load_for(config_path, dumper_id))
    if background:
        # Started once the new process writes its status (it does once it serves): never
        # mistake the file of an earlier run for it.
        (directory / "status.json").unlink(missing_ok=True)
        with open(directory / "pipeline.log", "ab") as log:
            proc = subprocess.Popen(
                [*service, "--supervise"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ConfigError(
                    f"the pipeline exited with code {proc.returncode}; see {directory / 'pipeline.log'}"
                )
            service = pid_file.running()
            if (directory / "status.json").exists() and service is not None:
                print(
                    f"started (pid {service.pid}, supervised by pid {proc.pid}: "
                    f"restarted after a crash); log: {directory / 'pipeline.log'}"
                )
                return 0
            time.sleep(0.1)
        raise TimeoutError(
            f"the pipeline did not report status within 30s; see {directory / 'pipeline.log'}"
        )
    from dumper.service import run_service

    pid_file.write()
    try:
        return run_service(load_for(config_path, dumper_id), directory)
    finally:
        pid_file.remove()


def cmd_stop(args) -> int:
    directory = state_dir(args.config, args.dumper_id)
    # The supervisor first (it stops the service and restarts nothing), else the service.
    # (A stale file names no process: its pid may since be another's, never signalled.)
    files = [PidFile(directory / name) for name in (SUPERVISOR_PID, PIPELINE_PID)]
    running = [(f, p) for f in files if (p := f.running()) is not None]
    if not running:
        print("not running")
        return 0
    os.kill(running[0][1].pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(p.alive() for _, p in running):
        time.sleep(0.1)
    for f, p in running:
        if p.alive():
            os.kill(p.pid, signal.SIGKILL)
        f.remove()
    print(f"stopped (pid {running[-1][1].pid})")
    return 0


def cmd_status(args) -> int:
    directory = state_dir(args.config, args.dumper_id)
    status_file = directory / "status.json"
    supervisor = read_state(directory)
    if not status_file.exists() or PidFile(directory / PIPELINE_PID).running() is None:
        if supervisor is None:
            print("not running")
        elif args.json:
            print(json.dumps({"supervisor": supervisor}, indent=2))
        else:
            print(*_supervisor_lines(supervisor, time.time()) or ["starting"], sep="\n")
        return 1
    status = json.loads(status_file.read_text())
    if supervisor is not None:
        status["supervisor"] = supervisor
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    for line in status_lines(status, time.time()):
        print(line)
    return 0


def status_lines(status: dict, now: float) -> list[str]:
    """What `cdc status` prints for one status file."""
    age = now - status["written_at"]
    lines = [*_supervisor_lines(status.get("supervisor"), now), *_pause_lines(status, now)]
    ha = status.get("ha")
    if ha is not None:
        lines.append(_ha_line(ha))
        if ha["role"] != "leader":
            return [*lines, *_served_lines(status)]
    if "last_tso" not in status:
        # HA: the node won the lease a moment ago and is still starting its pipeline.
        return [*lines, f"pipeline starting  (status {age:.1f}s old)", *_served_lines(status)]
    lines.append(
        f"global TSO {status['last_tso']}  lag {status['lag_ms']} ms  "
        f"{status['transactions']} txns  {status['events_per_s']:.0f} events/s  "
        f"file {status['file']}:{status['position']}  (status {age:.1f}s old)"
    )
    lines.append(f"{'DN':<6}{'STATE':<10}{'POSITION':<28}{'WATERMARK TSO':<22}{'SILENT':>8}")
    for dn in status["dns"]:
        lines.append(
            f"{dn['name']:<6}{dn['state']:<10}{dn.get('position', '-'):<28}"
            f"{dn.get('watermark_tso') or '-'!s:<22}{dn.get('silent_s', 0.0):>7.1f}s"
        )
    lines.extend(_stream_lines(status.get("streams")))
    lines.extend(f"! {problem}" for problem in status.get("problems", []))
    lines.extend(_served_lines(status))
    return lines


def _stream_lines(streams: list[dict] | None) -> list[str]:
    """`[dumper] streams` > 1: each stream's process, its port and binlog (docs/streams.md)."""
    if not streams:
        return []
    lines = [f"{'STREAM':<8}{'PORT':<7}{'FILE:POSITION':<24}{'GTID':>8}{'LAST TSO':>22}{'TXNS':>9}"]
    for s in streams:
        where = f"{s.get('file') or '-'}:{s.get('position', 0)}"
        gate = s.get("ha", {})  # HA: the stream's own ack gate (docs/streams.md)
        acks = (
            f"  acks {'DEGRADED' if gate['ack_gate_degraded'] else 'on'}"
            if "ack_gate_degraded" in gate
            else ""
        )
        if bound := gate.get("served_bound"):  # (recorded in the GMS before serving past)
            acks += f" up to {bound['file']}:{bound['position']}"
        lines.append(
            f"{s['stream']:<8}{s['port']:<7}{where:<24}{s.get('gno', 0):>8}"
            f"{s.get('last_tso', 0):>22}{s.get('transactions', 0):>9}{acks}"
        )
    return lines


def _supervisor_lines(sup: dict | None, now: float) -> list[str]:
    """Crashes of the service the supervisor restarted (nothing while there were none)."""
    if not sup or not sup.get("restarts"):
        return []
    last = sup["last_exit"]
    at = time.strftime("%H:%M:%S", time.localtime(last["at"]))
    head = "CRASH LOOP: " if sup.get("crash_loop") else ""
    line = (
        f"{head}the service was restarted {sup['restarts']} time(s) after crashing; last: "
        f"{last['how']} at {at} after {last['ran_s']}s (see pipeline.log)"
    )
    nxt = sup.get("next_start_at")
    if nxt and nxt > now:
        line += f"; next start in {nxt - now:.0f}s"
    return [line]


def _pause_lines(status: dict, now: float) -> list[str]:
    """What the pipeline waits for now (a dependency at fault, docs/faults.md), first."""
    return [
        f"PAUSED ({p['reason']}) since {time.strftime('%H:%M:%S', time.localtime(p['since']))} "
        f"({now - p['since']:.0f}s): {p['detail']}"
        for p in status.get("pauses", [])
    ]


def _served_lines(status: dict) -> list[str]:
    """The binlog's files and the consumers of the dumper (lag behind the written end)."""
    lines = []
    binlog = status.get("binlog")
    if binlog is not None:
        lines.append(
            f"binlog: {binlog['files']} files, {binlog['bytes'] / 1e6:.1f} MB from "
            f"{binlog['oldest']}, {binlog['purged_files']} purged by retention"
        )
    lines += _hold_lines(status.get("consumer_holds"))
    consumers = status.get("consumers")
    if consumers is None:
        return lines
    lines.append(f"consumers: {len(consumers)}")
    if consumers:
        lines.append(
            f"{'ID':>5}  {'USER@HOST':<24}{'SERVER_ID':>10}  {'POSITION':<26}"
            f"{'LAG BYTES':>12}{'LAG':>9}"
        )
    for c in consumers:
        who = f"{c['user']}@{c['host']}"
        kind = " (HA follower)" if c["follower"] else ""
        lines.append(
            f"{c['id']:>5}  {who:<24}{c['server_id']:>10}  {c['file'] + ':' + str(c['position']):<26}"
            f"{c['lag_bytes']:>12,}{c['lag_s']:>8.1f}s{kind}"
        )
    return lines


def _hold_lines(holds: dict | None) -> list[str]:
    """The named consumers' holds (docs/retention.md); a dropped hold is shown as such."""
    if not holds or not holds["consumers"]:
        return []
    lines = [f"consumer holds: {len(holds['consumers'])}, {holds['dropped']} dropped so far"]
    for c in holds["consumers"]:
        where = f"{c['file']}:{c['position']}" if c["file"] else "(not seen yet)"
        state = f"HOLD DROPPED: {c['dropped']}" if c["dropped"] else f"holds {c['holds'] or '-'}"
        away = "" if c["connected"] else ", away"
        lines.append(
            f"  {c['name']:<20} {where:<26} lag {c['lag_bytes']:,} bytes, "
            f"{c['lag_s']:.0f}s{away}; {state}"
        )
    return lines


def _ha_line(ha: dict) -> str:
    head = f"dumper {ha['dumper_id']} ({ha['address']}): {ha['role']}, term {ha['term']}"
    if ha["role"] == "leader":
        if "acknowledged" not in ha:
            return head
        acks = ", ".join(
            f"server_id {sid} at {a['file']}:{a['position']} ({a['age_s']:.1f}s ago)"
            for sid, a in sorted(ha["acknowledged"].items())
        )
        gate = "DEGRADED (serving unacknowledged data)" if ha["ack_gate_degraded"] else "on"
        if bound := ha.get("served_bound"):
            gate += f", up to {bound['file']}:{bound['position']} (recorded in the GMS)"
        return f"{head}; serving acknowledged data only: {gate}; acknowledged: {acks or 'none'}"
    if w := ha.get("takeover_waits_for"):
        return (
            f"{head}; NOT TAKING OVER: "
            + (f"stream {w['stream']}: " if "stream" in w else "")
            + f"term {w['term']}'s leader (dumper {w['holder']}) served "
            f"consumers up to {w['served_file']}:{w['served_position']}, this copy ends at "
            f"{w['copy_file']}:{w['copy_position']}; waiting {w['since_s']:.0f} s for dumper "
            f"{w['holder']} (or a copy that far) to come back"
        )
    if ha["role"] == "follower" and "copies" in ha:  # one copy per stream (docs/streams.md)
        copies = ", ".join(
            f"stream {c['stream']} at {c['file'] or '-'}:{c['position']}" for c in ha["copies"]
        )
        return f"{head}; copying from {ha['leader']}: {copies}"
    if ha["role"] == "follower":
        behind = (
            f"{ha['behind_bytes']} bytes behind"
            if ha.get("behind_bytes") is not None
            else f"{ha.get('behind_files')} file(s) behind"
        )
        return (
            f"{head}; copying from {ha['leader']} at {ha['file']}:{ha['position']} "
            f"(leader {ha['leader_file']}:{ha['leader_position']}, {behind})"
        )
    return head + " (looking for a leader)"
