"""The one error type of the codec: CodecError, carrying the file name and byte position when
the caller knows them, so a user can find the bad event with `mariadb-binlog --start-position`."""

from __future__ import annotations


class CodecError(ValueError):
    """Malformed or unsupported binlog bytes.

    `file` and `pos` (offset of the event's first byte in the file) are filled in by whoever
    knows them: the reader does, pure decoders usually do not and are wrapped by `located()`.
    """

    def __init__(self, message: str, *, file: str | None = None, pos: int | None = None) -> None:
        self.reason = message
        self.file = file
        self.pos = pos
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file is not None:
            where.append(f"file {self.file}")
        if self.pos is not None:
            where.append(f"position {self.pos}")
        if not where:
            return self.reason
        return f"{self.reason} (at {', '.join(where)})"

    def located(self, *, file: str | None = None, pos: int | None = None) -> CodecError:
        """A copy that also says where; keeps any location already known."""
        return CodecError(
            self.reason,
            file=self.file if self.file is not None else file,
            pos=self.pos if self.pos is not None else pos,
        )


class NotSupportedError(CodecError):
    """Well-formed input the codec deliberately does not handle (e.g. compressed events)."""
