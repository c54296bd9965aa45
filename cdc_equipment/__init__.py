"""Equipment for tests, the demo, benches and operators, outside the runtime (no stage imports
it): the hooks the tests drive the protocol's writers with (`crash_points`), the ground-truth
log's reader (`ground_truth`) and processes named by identity (`processes`: the CLI's pid files,
the local cluster's MariaDB servers)."""
