"""The commands README.md shows a user, as printed.

A command is a line of a ```sh or ```sql block (a trailing `# comment` is the README's
explanation, not part of it), a whole ```python block, or a code span in a table column
headed "command". Code spans in prose are names (`cdc cluster`, `mariadb-binlog`), not
commands; code blocks without a language are sample output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_FENCE = re.compile(r"^```(\w*)\s*$")
_SPAN = re.compile(r"`([^`]+)`")
_TRAILING_COMMENT = re.compile(r"\s+#\s.*$")


@dataclass(frozen=True, slots=True)
class Command:
    text: str
    kind: str  # "sh", "sql", "python" or "table"
    section: str  # the "## " heading it is under


def _cells(line: str) -> list[str]:
    # A `\|` inside a cell is a literal bar (GitHub's table escape).
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [c.strip().replace("\\|", "|") for c in cells]


def commands(text: str | None = None) -> list[Command]:
    lines = (README.read_text() if text is None else text).splitlines()
    found: list[Command] = []
    section = ""
    fence: str | None = None
    block: list[str] = []
    command_columns: list[int] = []
    for line in lines:
        match = _FENCE.match(line)
        if fence is not None:
            if match and not match.group(1):
                if fence == "python":
                    found.append(Command("\n".join(block).strip(), "python", section))
                fence, block = None, []
            elif fence in ("sh", "sql"):
                stripped = _TRAILING_COMMENT.sub("", line).strip()
                if stripped and not stripped.startswith("#"):
                    found.append(Command(stripped, fence, section))
            else:
                block.append(line)
            continue
        if match:
            fence = match.group(1)
            continue
        if line.startswith("## "):
            section = line[3:].strip()
        if not line.startswith("|"):
            command_columns = []
            continue
        cells = _cells(line)
        if not command_columns:
            command_columns = [i for i, c in enumerate(cells) if c.lower() == "command"] or [-1]
            continue
        for i in command_columns:
            if 0 <= i < len(cells):
                for span in _SPAN.findall(cells[i]):
                    found.append(Command(" ".join(span.split()), "table", section))
    return found
