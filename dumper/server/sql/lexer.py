"""The SQL lexer: comment stripping, multi-statement splitting outside quotes, and the tokenizer
of the statements replication clients and the mariadb CLI send (`parser.py` reads its tokens)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dumper.server.handlers import SqlError

# -- limits ---------------------------------------------------------------------------------------
# Every pattern that runs over client text is linear in time and memory: quoted bodies use
# possessive repeats (Python >= 3.11), which keep no backtracking state per character — the
# plain `(?:[^'\\]|\\.|'')*` form cost ~300 bytes of regex stack per byte of literal (issue 19).
# Splitting copies runs of text in slices, never per character.
MAX_TOKENS = 100_000  # per statement: every statement clients send has a few hundred at most
MAX_DIGITS = 65  # MySQL's DECIMAL precision: a longer number literal is refused, not converted
MAX_NAME_CHARS = 256  # a result column named after its expression is cut there, as MySQL does
UINT64_MAX = (1 << 64) - 1


# -- splitting ------------------------------------------------------------------------------------
# Text copied as it is: anything but `;` and comments, with whole quoted runs (an
# unterminated one runs to the end: `'?`, and `\\.?` for a lone backslash at the very end). One
# possessive repeat skips a whole stretch in C however many quotes it holds (`a'a'a'…`).
_VERBATIM = re.compile(
    r"""(?:[^'"`;#/\-]++
    | '(?:[^'\\]++|\\.?|'')*+'?
    | "(?:[^"\\]++|\\.?|"")*+"?
    | `(?:[^`]++|``)*+`?
    | /(?!\*)
    | -(?!-(?:[ \t\r\n]|\Z))   # a minus sign; `-- ` (dash dash space) opens a comment
    )*+""",
    re.S | re.X,
)
_EXEC_COMMENT = re.compile(r"/\*M?!\d*")
_SEPARATORS = re.compile(r"[;\s]*+")  # empty statements between `;`s are dropped


def split_statements(sql: str) -> list[str]:
    """Strip comments (keeping the text of `/*! ... */` executable comments) and split on `;`
    outside quotes; empty statements are dropped."""
    out: list[str] = []
    cur: list[str] = []  # the statement so far, in pieces
    i, n = 0, len(sql)
    verbatim = _VERBATIM.match
    while True:
        j = verbatim(sql, i).end()  # always matches, maybe empty
        cur.append(sql[i:j])
        if j >= n:
            break
        if sql.startswith("/*", j):
            end = sql.find("*/", j + 2)
            end = n if end < 0 else end
            ex = _EXEC_COMMENT.match(sql, j, end)
            if ex:  # executable comment: its text is part of the statement
                cur.append(" " + sql[ex.end() : end] + " ")
            else:
                cur.append(" ")
            i = end + 2
        elif sql[j] in "#-":  # `# …` or `-- …`, to the end of the line
            end = sql.find("\n", j)
            i = n if end < 0 else end
        else:  # ";"
            if stmt := "".join(cur).strip():
                out.append(stmt)
            cur = []
            i = _SEPARATORS.match(sql, j).end()  # type: ignore[union-attr]  # `;;;…` at once
    if stmt := "".join(cur).strip():
        out.append(stmt)
    return out


# -- tokens ---------------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"""
    (?P<ws>\s++)
  | (?P<sysvar>@@(?:(?i:global|session|local)\s*+\.\s*+)?`?[A-Za-z0-9_$]++`?)
  | (?P<uservar>@(?:'(?:[^'\\]++|\\.)*+'|"(?:[^"\\]++|\\.)*+"|`[^`]*+`|[A-Za-z0-9_$.]++))
  | (?P<str>'(?:[^'\\]++|\\.|'')*+'|"(?:[^"\\]++|\\.|"")*+")
  | (?P<num>\d++(?:\.\d++)?(?:[eE][-+]?\d++)?)
  | (?P<qident>`(?:[^`]++|``)*+`)
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*+)
  | (?P<op><=>|<>|!=|<=|>=|:=|[(),=.*<>+\-/%:])
    """,
    re.X | re.S,
)
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_ESCAPE = re.compile(r"\\(.)", re.S)


def _unescape(m: re.Match[str]) -> str:
    ch = m.group(1)
    if ch in "%_":  # MySQL keeps the backslash before % and _ (LIKE escapes)
        return "\\" + ch
    return _ESCAPES.get(ch, ch)


def unquote_string(text: str) -> str:
    q, body = text[0], text[1:-1]
    if q + q in body:
        body = body.replace(q + q, q)
    if "\\" not in body:
        return body
    return _ESCAPE.sub(_unescape, body)


@dataclass(slots=True)
class Token:
    kind: str
    text: str
    value: str
    start: int
    end: int

    def word(self) -> str:
        return self.text.upper() if self.kind == "ident" else ""


def tokenize(stmt: str) -> list[Token]:
    tokens, pos = [], 0
    while pos < len(stmt):
        m = _TOKEN.match(stmt, pos)
        if not m:
            raise SqlError(f"You have an error in your SQL syntax near '{stmt[pos : pos + 40]}'")
        kind = m.lastgroup or ""
        text = m.group()
        pos = m.end()
        if kind == "ws":
            continue
        if len(tokens) >= MAX_TOKENS:
            raise SqlError(
                f"Statement too long for the binlog server: more than {MAX_TOKENS} tokens"
            )
        value = text
        if kind == "str":
            value = unquote_string(text)
        elif kind == "qident":
            kind, value = "ident_q", text[1:-1].replace("``", "`")
        elif kind == "uservar":
            name = text[1:]
            value = unquote_string(name) if name[0] in "'\"" else name.strip("`")
            value = value.lower()
        elif kind == "sysvar":
            value = re.sub(r"\s+|`", "", text[2:]).lower()
        tokens.append(Token(kind, text, value, m.start(), m.end()))
    return tokens
