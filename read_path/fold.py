"""Pure folds over a read's chunks: LIMIT [offset,] n as a window over them, and COUNT(*) /
MIN / MAX folded over the rows' fields."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from read_path.plan import Plan
from read_path.request import TableItem
from read_path.values import sort_key, text_row


async def window(chunks: AsyncIterator[list], skip: int, left: int | None) -> AsyncIterator[list]:
    """The chunks' rows after the first `skip`, `left` of them at most (None: all): LIMIT
    [offset,] n, or the split query's first rows. `chunks` is closed at the end (its reads
    stop at once, not when it is collected)."""
    async with contextlib.aclosing(chunks):  # type: ignore[type-var]
        async for chunk in chunks:
            if skip:
                taken = min(skip, len(chunk))
                skip -= taken
                chunk = chunk[taken:]
            if left is not None:
                chunk = chunk[:left]
                left -= len(chunk)
            yield chunk
            if left is not None and left <= 0:
                return


async def aggregate(
    items: list[TableItem], plan: Plan, chunks: AsyncIterator[list], skip: int, left: int | None
) -> bytes:
    """The text row of COUNT(*) / MIN / MAX over the fields of `chunks`' rows (the data
    columns: a MIN/MAX's column in the order of the items), after `skip`, `left` at most."""
    count = 0
    best: list[tuple[object, bytes] | None] = [None] * len(items)
    data_at = {}  # item index → its field in a page's data
    j = 0
    for i, item in enumerate(items):
        if item.kind in ("MIN", "MAX"):
            data_at[i] = j
            j += 1
    async with contextlib.aclosing(window(chunks, skip, left)) as rows:
        async for chunk in rows:
            for fields in chunk:
                count += 1
                for i, at in data_at.items():
                    text = fields[at]
                    if text is None:
                        continue
                    col = plan.columns[plan.data[at]]
                    k = sort_key(col, text)
                    cur = best[i]
                    if cur is None or (k < cur[0] if items[i].kind == "MIN" else k > cur[0]):  # type: ignore[operator]
                        best[i] = (k, text)
    out: list[bytes | None] = []
    for i, item in enumerate(items):
        if item.kind == "COUNT":
            out.append(str(count).encode())
        else:
            b = best[i]
            out.append(None if b is None else b[1])
    return text_row(out)
