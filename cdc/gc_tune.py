"""The garbage collector for the pipeline's processes (a MergeSource worker, the leader).

Both make a few dozen short-lived objects per transaction (fragments, statements, keys,
events), and the default gen-0 threshold (700) ran a collection every few transactions,
re-scanning what survived: a fifth of a MergeSource's CPU in `cdc bench merge-source`, ~15 %
of the leader's steady state. With the objects of start-up frozen (never scanned again) and a
threshold above what one batch keeps alive, collections become rare; cycles are still collected.
"""

from __future__ import annotations

import gc


def tune_gc() -> None:
    """Call once the process has imported what it runs (it freezes what exists then)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 100)
