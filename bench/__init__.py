"""Every benchmark and the latency tooling, outside the runtime: no runtime package imports
bench/ (tests/test_layout.py), so what a bench needs (throw-away clusters, the reference CN's
load, a timed baseline) never ships in the stages. Each module has `main(argv, figures=None) ->
int` and prints its ratio against a baseline measured in the same run, beside its goal from
bench/goals.py (kept in `figures`: `cdc bench all` prints them all at the end).

    `cdc bench writer`        bench/writer.py        BinlogWriter vs a plain buffered write
    `cdc bench dumper`        bench/dumper.py        mariadb-binlog --raw from our dumper vs
                                                     from mariadbd, same file
    `cdc bench fanout`        bench/fanout.py        the same, 1 / 16 / 64 concurrent clients:
                                                     MB/s, p99 first event, CPU per served MB
    `cdc bench merge-source`  bench/merge_source.py  one MergeSource vs the raw dump of its DN
    `cdc bench pipeline`      bench/pipeline.py      catch-up of the whole pipeline vs the raw
                                                     dump of the DN binlogs
    `cdc bench scale`         bench/scale.py         bench/pipeline.py on 2, 4, 8 DNs
    `cdc bench streams`       bench/streams.py       catch-up into 1, 2, 4 streams of the same DN
                                                     binlogs: time, events/s, CPU of the merge
                                                     and of each stream's writer
    `cdc bench latency`       bench/latency.py       CN commit -> seen by a dump client of the
                                                     dumper, at a steady TPS
    `cdc bench hostile`       bench/hostile.py       binlog growth with / without hostile
                                                     dumper clients
    `cdc bench big-txn`       bench/big_txn.py       one huge transaction: time and peak RSS
    `cdc bench cn`            bench/cn.py            the reference CN's throughput and CPU per
                                                     transaction, mode by mode
    `cdc bench cn-change`     bench/cn_change.py     longest write stall per DDL and per
                                                     partition move vs txn p99 without change
    `cdc bench backfill`      bench/backfill.py      Spark backfill vs a plain SELECT * dump
    `cdc bench snapshot`      bench/snapshot.py      SELECT * through the dumper, as of a binlog
                                                     position, vs mariadb --quick of the shards
    `cdc bench as-of`         bench/as_of.py         the same as of an old point vs at the end:
                                                     rows/s, binlog after it, peak RSS held
    `cdc bench snapshot-isolation`  bench/snapshot_isolation.py  binlog growth with / without
                                                     4 clients reading whole tables
    `cdc bench all`           cdc_cli/commands/bench.py  every one above (`--quick`: small sizes),
                                                     then each figure beside its goal

Helpers: bench/goals.py (every figure's goal, the verdict beside it, the summary),
bench/raw_dump.py (the common baseline: `mariadb-binlog --read-from-remote-server
--raw`, timed) and bench/latency_stages.py (reads the `cdc.stage_trace` files of a latency run
into a per-stage breakdown; cdc/stage_trace.py, the hook the runtime calls, stays in cdc/).
"""
