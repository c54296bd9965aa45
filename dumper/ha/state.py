"""Where one dumper process of an HA group stands (`HaState`): candidate → follower ⇄ leader,
and while it leads, its lease by its own clock. No I/O: `HaNode` and its parts change it, the
server process and each term's pipeline read it.

Fencing: the leader renews its lease every `lease_renew_ms`; the lease expires `lease_ms` after
the GMS received the last renewal, and the leader stops writing `LEASE_MARGIN_S` before its own
clock says that, counting from *before* it sent the renewal. So a follower (which can only
take the lease once the GMS clock passed `expires_at`) never writes while the old leader does.

Stepping down (docs/faults.md, "Partitions"): a leader whose lease ran out steps down at once,
before it waits for anything its term started (a heartbeat blocked on a cut GMS link must not
hold the fence): nothing more is written, not even a STOP event (a byte only its copy would
hold), and until its copy is aligned with the term that follows it serves consumers only what a
follower acknowledged (`gated`). While its lease is in doubt (a renewal overdue) it never gives
up waiting for acknowledgements either (`sure_until`, published to the server process).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cdc.config import DumperConfig
from dumper.pipeline import LeaderError

if TYPE_CHECKING:
    from dumper.pipeline import Leader

log = logging.getLogger(__name__)

LEASE_MARGIN_S = 1.0
# The lease is sure (the ack gate may serve what no follower holds yet, after `ack_wait_ms`)
# for this many renew intervals after a renewal was sent that the GMS confirmed: one renewal
# overdue and the leader serves acknowledged data only.
SURE_RENEWALS = 1.5


class FencedError(LeaderError):
    """This dumper lost its lease: it stopped writing and goes back to following."""


class HaState:
    """The role and term of dumper `d.id`, the pipeline of the term it leads, and its lease."""

    def __init__(self, d: DumperConfig, clock: Callable[[], float] = time.monotonic):
        """`d`: read at each use (a test changes the lease's length before the node runs)."""
        self._d = d
        self._clock = clock
        self.role = "candidate"
        self.term = 0
        self.leader: Leader | None = None
        self.took_over_at: float | None = None  # wall time this process became leader
        self.valid_until = 0.0  # (monotonic) the fence refuses every write from then on
        self.renewed_at = 0.0  # (monotonic) when the last renewal the GMS confirmed was sent
        self.stepped_down = True  # no term of ours runs: the fence refuses every write
        # A term this process led whose successor's start its copy is not yet cut back to:
        # until then its copy may hold bytes beyond the history that goes on, and it serves
        # only what followers acknowledged.
        self.unaligned_term: int | None = None
        self.lease_free_at: float | None = None  # (monotonic) first saw the lease expired

    # -- transitions --------------------------------------------------------------------------
    def follow(self, term: int) -> None:
        self.role, self.term = "follower", term

    def lost(self) -> None:
        """A term that failed to start, or that ended (fenced): a candidate again."""
        self.leader, self.role = None, "candidate"

    def granted(self) -> None:
        """The GMS granted the lease just now: writing may begin (the fence lets it pass)."""
        self.renewed_at = self._clock()
        self.valid_until = self.renewed_at + self._d.lease_ms / 1000 - LEASE_MARGIN_S
        self.stepped_down = False

    def lead(self, term: int) -> None:
        self.role, self.term = "leader", term
        self.took_over_at = time.time()

    def renewed(self, sent: float) -> None:
        """The GMS confirmed the renewal sent at `sent` (monotonic)."""
        self.renewed_at = sent
        self.valid_until = sent + self._d.lease_ms / 1000 - LEASE_MARGIN_S

    def refused(self) -> None:
        """The GMS refused the renewal: another dumper holds the lease."""
        self.valid_until = 0

    def step_down(self, term: int, *, fenced: bool) -> None:
        """Stop leading term `term` now: no write passes the fence any more (a writer closed
        after this leaves no STOP event: `Leader.close`), and the server goes on gating its
        consumers by acknowledgements until the copy is aligned with the next term."""
        if self.stepped_down:
            return
        self.stepped_down = True
        self.unaligned_term = term
        self.role = "candidate"
        if fenced:
            log.warning("dumper %d: lease of term %d ran out: stepped down", self._d.id, term)

    def aligned_with(self, term: int) -> None:
        """Every copy is a prefix of term `term`'s stream (its start recorded and cut back to)."""
        if self.unaligned_term is not None and term > self.unaligned_term:
            self.unaligned_term = None  # a prefix of the term that goes on: served whole

    # -- what the lease allows ----------------------------------------------------------------
    def lease_left(self) -> float:
        """Seconds until the fence refuses (monotonic)."""
        return self.valid_until - self._clock()

    def fence(self) -> None:
        """Raises once this process may no longer write: stepped down, or its lease ran out."""
        if self.stepped_down or self._clock() >= self.valid_until:
            raise FencedError(
                f"dumper {self._d.id}: the lease of term {self.term} could not be renewed within "
                f"{self._d.lease_ms} ms; stopped writing (another dumper may lead now)"
            )

    def sure_until(self) -> float:
        """Until when (monotonic) this process surely holds its lease: the ack gate may serve
        unacknowledged data only before then. 0 when not leading."""
        if self.role != "leader" or self.stepped_down:
            return 0.0
        renew_s = self._d.lease_renew_ms / 1000
        return min(self.valid_until, self.renewed_at + SURE_RENEWALS * renew_s)

    def gated(self) -> bool:
        """Whether consumers are served only what followers acknowledged (the ack gate
        applies): while leading, and after a term until the copy is aligned with the next."""
        return self.role == "leader" or self.unaligned_term is not None
