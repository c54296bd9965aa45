"""The one error type of the backfill: a user-facing message naming the table, DN or TSO."""


class BackfillError(RuntimeError):
    """The backfill cannot produce a consistent snapshot; the message says what and why."""
