"""`python -m dumper --config cdc.toml [--binlog-dir DIR] [--port N]`: serve a binlog directory
until interrupted, with no pipeline writing it (e.g. a copy of the files, docs/dumper.md); it
has no `cdc` sub-command (`cdc start` serves the binlog the pipeline writes)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging

from cdc.config import load
from dumper.server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dumper", description=__doc__)
    parser.add_argument("--config", default="cdc.toml")
    parser.add_argument("--binlog-dir", default=None)
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = load(args.config).dumper
    if args.port is not None:
        config = dataclasses.replace(config, port=args.port)

    async def run() -> None:
        server = await serve(config, args.binlog_dir)
        try:
            await server.serve_forever()
        finally:
            await server.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
