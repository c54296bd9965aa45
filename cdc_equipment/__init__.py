"""Equipment for tests, the demo, benches and operators, outside the runtime (no stage imports it;
tests/test_layout.py): the reference CN (`cdc_equipment/cn/`), the local MariaDB cluster
(`cdc_equipment/local_cluster/`), the checks of `cdc check` and `cdc verify-binlog`
(`cdc_equipment/checks/`), and, as modules of their own, the hook the kill tests crash the
protocol's writers with (`crash_points`), the ground-truth log's reader (`ground_truth`) and
processes named by identity (`processes`: the CLI's pid files, the local cluster's MariaDB servers).

One top-level name, so that an installed wheel brings no generic ones (docs/development.md,
"Packaging")."""
