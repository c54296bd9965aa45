"""The `cdc` command (cdc_cli/main.py, one sub-command group per module of cdc_cli/commands/).
Outside the runtime: it is the top of the dependency graph and nothing but tests imports it."""
