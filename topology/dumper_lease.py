"""Dumper HA state in the GMS: the leader lease (`binlog_dumper_lease`), where each leader term
began (`binlog_dumper_term`, with how far a degraded ack gate may serve in it: `ServedBound`) and
what every dumper process reports (`binlog_dumper_member`).

Times are the GMS's own clock (`NOW(6)`), so the dumpers' clocks never need to agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import pymysql

LEASE_NAME = "global-binlog"


@dataclass(frozen=True, slots=True)
class Lease:
    holder: int  # dumper id
    address: str  # host:port of the holder's dump server
    term: int
    live: bool  # not expired by the GMS clock
    remaining_s: float = 0.0  # until it expires, by the GMS clock (at the time of reading)


@dataclass(frozen=True, slots=True)
class Member:
    dumper_id: int
    address: str
    role: str  # leader | follower | candidate
    term: int
    file: str
    position: int
    age_s: float  # since the member last reported
    # With several streams: its copy's end in each stream (file, position), which the election
    # compares (dumper/ha/election.py); `file` is then "" and `position` their sum.
    streams: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class TermStart:
    term: int
    dumper_id: int
    file: str
    position: int
    stream: int | None = None  # a stream of a multi-stream binlog (None: the single one)


@dataclass(frozen=True, slots=True)
class ServedBound:
    """How far the leader of `term` (dumper `dumper_id`) may have served consumers past what its
    followers acknowledged (its ack gate degraded): a candidate whose copy ends before
    `file:position` would start a history those consumers did not read."""

    term: int
    dumper_id: int
    file: str
    position: int
    stream: int | None = None  # a stream of a multi-stream binlog (None: the single one)


class DumperLeaseStore:
    def __init__(self, conn: pymysql.Connection, database: str = "cdc_meta"):
        self._conn = conn
        self._db = f"`{database}`"

    def current(self) -> Lease | None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT holder, address, epoch, expires_at > NOW(6), "
                f"TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) / 1e6 "
                f"FROM {self._db}.binlog_dumper_lease WHERE name=%s",
                (LEASE_NAME,),
            )
            row = cur.fetchone()
        if row is None:
            return None
        return Lease(int(row[0]), row[1], int(row[2]), bool(row[3]), float(row[4]))

    def try_acquire(self, holder: int, address: str, lease_ms: int) -> int | None:
        """Take the lease if nobody holds a live one; returns the new term, or None."""
        with self._conn.cursor() as cur:
            cur.execute("BEGIN")
            try:
                cur.execute(
                    f"SELECT epoch, expires_at > NOW(6) FROM {self._db}.binlog_dumper_lease "
                    "WHERE name=%s FOR UPDATE",
                    (LEASE_NAME,),
                )
                row = cur.fetchone()
                if row is not None and row[1]:
                    cur.execute("ROLLBACK")
                    return None
                term = (int(row[0]) if row else 0) + 1
                cur.execute(
                    f"INSERT INTO {self._db}.binlog_dumper_lease (name, holder, address, epoch, expires_at) "
                    "VALUES (%s, %s, %s, %s, NOW(6) + INTERVAL %s MICROSECOND) "
                    "ON DUPLICATE KEY UPDATE holder=VALUES(holder), address=VALUES(address), "
                    "epoch=VALUES(epoch), expires_at=VALUES(expires_at)",
                    (LEASE_NAME, str(holder), address, term, lease_ms * 1000),
                )
                cur.execute("COMMIT")
                return term
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def renew(self, holder: int, term: int, lease_ms: int) -> bool:
        """Extend our lease; False if another term has begun (we are fenced)."""
        with self._conn.cursor() as cur:
            n = cur.execute(
                f"UPDATE {self._db}.binlog_dumper_lease SET expires_at = NOW(6) + INTERVAL %s MICROSECOND "
                "WHERE name=%s AND holder=%s AND epoch=%s AND expires_at > NOW(6)",
                (lease_ms * 1000, LEASE_NAME, str(holder), term),
            )
        return n == 1

    def release(self, holder: int, term: int) -> None:
        """Clean stop: let a follower take over at once instead of after the lease time."""
        with self._conn.cursor() as cur:
            cur.execute(
                f"UPDATE {self._db}.binlog_dumper_lease SET expires_at = NOW(6) "
                "WHERE name=%s AND holder=%s AND epoch=%s",
                (LEASE_NAME, str(holder), term),
            )

    def record_term(self, start: TermStart) -> None:
        """A stream's start is recorded once per term (INSERT IGNORE): a stream process that
        restarts within the term began writing where its first start did."""
        if start.stream is not None:
            with self._conn.cursor() as cur:
                cur.execute(
                    f"INSERT IGNORE INTO {self._db}.binlog_dumper_stream_term "
                    "(term, stream, dumper_id, file_name, position) VALUES (%s, %s, %s, %s, %s)",
                    (start.term, start.stream, start.dumper_id, start.file, start.position),
                )
            return
        with self._conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self._db}.binlog_dumper_term (term, dumper_id, file_name, position) "
                "VALUES (%s, %s, %s, %s)",
                (start.term, start.dumper_id, start.file, start.position),
            )

    def terms_after(self, term: int, stream: int | None = None) -> list[TermStart]:
        """The starts of the terms after `term`: of the single stream, or of stream `stream`."""
        with self._conn.cursor() as cur:
            if stream is None:
                cur.execute(
                    f"SELECT term, dumper_id, file_name, position FROM {self._db}.binlog_dumper_term "
                    "WHERE term > %s ORDER BY term",
                    (term,),
                )
            else:
                cur.execute(
                    f"SELECT term, dumper_id, file_name, position "
                    f"FROM {self._db}.binlog_dumper_stream_term "
                    "WHERE term > %s AND stream = %s ORDER BY term",
                    (term, stream),
                )
            return [
                TermStart(int(r[0]), int(r[1]), r[2], int(r[3]), stream) for r in cur.fetchall()
            ]

    def record_served(
        self, term: int, holder: int, file: str, position: int, stream: int | None = None
    ) -> bool:
        """Record term `term`'s served bound (of the single stream, or of stream `stream`);
        only while `holder` holds that term's lease (False: the lease is gone, nothing may be
        served past the acknowledgements)."""
        table, where, args = "binlog_dumper_term", "", ()
        if stream is not None:
            table, where, args = "binlog_dumper_stream_term", "AND t.stream=%s ", (stream,)
        with self._conn.cursor() as cur:
            n = cur.execute(
                f"UPDATE {self._db}.{table} t JOIN {self._db}.binlog_dumper_lease l "
                "ON l.name=%s SET t.served_file=%s, t.served_position=%s "
                f"WHERE t.term=%s {where}AND t.dumper_id=%s AND l.holder=%s AND l.epoch=%s "
                "AND l.expires_at > NOW(6)",
                (LEASE_NAME, file, position, term, *args, holder, str(holder), term),
            )
        return n >= 1

    def served_bounds(
        self, stream: int | None = None
    ) -> list[tuple[TermStart, ServedBound | None]]:
        """Every recorded term's start and served bound (None: its gate never served past
        its followers' copies), oldest first: of the single stream, or of stream `stream`. A
        locking read: a bound being recorded is waited for, not missed."""
        table, where, args = "binlog_dumper_term", "", ()
        if stream is not None:
            table, where, args = "binlog_dumper_stream_term", "WHERE stream=%s ", (stream,)
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT term, dumper_id, file_name, position, served_file, served_position "
                f"FROM {self._db}.{table} {where}ORDER BY term LOCK IN SHARE MODE",
                args,
            )
            rows = cur.fetchall()
        return [
            (
                TermStart(int(r[0]), int(r[1]), r[2], int(r[3]), stream),
                ServedBound(int(r[0]), int(r[1]), r[4], int(r[5]), stream)
                if r[4] is not None
                else None,
            )
            for r in rows
        ]

    def report(self, m: Member) -> None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self._db}.binlog_dumper_member (dumper_id, address, role, term, file_name, position) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE address=VALUES(address), "
                "role=VALUES(role), term=VALUES(term), file_name=VALUES(file_name), "
                "position=VALUES(position), updated_at=NOW(6)",
                (m.dumper_id, m.address, m.role, m.term, m.file, m.position),
            )
            if m.streams:
                cur.executemany(
                    f"INSERT INTO {self._db}.binlog_dumper_member_stream (dumper_id, stream, file_name, position) "
                    "VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE file_name=VALUES(file_name), "
                    "position=VALUES(position)",
                    [(m.dumper_id, i, f, p) for i, (f, p) in enumerate(m.streams)],
                )

    def members(self) -> list[Member]:
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT dumper_id, stream, file_name, position FROM {self._db}.binlog_dumper_member_stream "
                "ORDER BY dumper_id, stream"
            )
            streams: dict[int, list[tuple[str, int]]] = {}
            for r in cur.fetchall():
                streams.setdefault(int(r[0]), []).append((r[2], int(r[3])))
            cur.execute(
                f"SELECT dumper_id, address, role, term, file_name, position, "
                f"TIMESTAMPDIFF(MICROSECOND, updated_at, NOW(6)) / 1e6 FROM {self._db}.binlog_dumper_member "
                "ORDER BY dumper_id"
            )
            return [
                Member(
                    int(r[0]),
                    r[1],
                    r[2],
                    int(r[3]),
                    r[4],
                    int(r[5]),
                    float(r[6]),
                    tuple(streams.get(int(r[0]), ())),
                )
                for r in cur.fetchall()
            ]
