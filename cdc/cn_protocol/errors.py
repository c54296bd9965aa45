"""Exceptions of the reference CN; each message says what failed, where, and what to do next."""

from __future__ import annotations


class CnError(RuntimeError):
    """Base class of every CN failure a user can act on."""


class NotInitialisedError(CnError):
    """The GMS catalogue or the DN private tables are missing."""


class RoutingError(CnError):
    """A statement the router cannot send to the right DN(s)."""


class CatalogueError(CnError):
    """An unknown logical table, or a catalogue change that is not allowed."""


class TransactionAborted(CnError):
    """The transaction was rolled back on every DN; it is safe to retry."""


class CommitOutcomeUnknown(CnError):
    """The commit decision may or may not be durable; `cdc cn recover` settles it."""


class TsoError(CnError):
    """The TSO could not be fetched from GMS."""
