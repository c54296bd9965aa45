"""Sub-command groups of the `cdc` CLI; each module has `register(subparsers)`."""
