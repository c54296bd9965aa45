"""Arguments every sub-command group shares: `--config`, read from `cdc.toml` in the current
directory unless given."""

from __future__ import annotations

import argparse

DEFAULT_CONFIG = "cdc.toml"


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=DEFAULT_CONFIG, help=f"default {DEFAULT_CONFIG}")
