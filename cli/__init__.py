"""The `cdc` command (cli/main.py, one sub-command group per module of cli/commands/). Outside
the runtime: it is the top of the dependency graph and nothing but tests imports it."""
