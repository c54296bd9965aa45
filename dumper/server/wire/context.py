"""What the protocol loop needs (server.py builds it once): the configuration it enforces
(limits, timeouts, accounts), TLS, the live connections it registers, and the global variables
a connection's timeouts default to. It answers nothing itself: the handlers do."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from cdc.config import DumperConfig
from dumper.server.sessions import Sessions, VarValue


@dataclass(slots=True)
class WireContext:
    config: DumperConfig
    sessions: Sessions
    variables: Mapping[str, VarValue]  # wait_timeout, net_read_timeout, ... (SET overrides)
    tls: ssl.SSLContext | None = None
