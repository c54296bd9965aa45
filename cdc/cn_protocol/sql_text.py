"""A small SQL lexer: just enough for the statement shapes a CN routes (literals are rendered by
`cdc.cn_protocol.sql`), and `parse_ddl`: which logical table a DDL statement names — what a
reader of the logical DDL text (a DDL record, the global binlog's DDL) needs to know.

Not the binlog server's lexer (dumper/server/sql/lexer.py), on purpose: the two read different
texts. This one reads what a CN routes and what DDL records hold, comments, `%s`, charset
introducers (`_binary'..'`), hex and non-ASCII names included, and every character is some
token; the server's reads what clients send once `split_statements` dropped the comments, with
MySQL's LIKE escapes (a backslash before `%` stays) and `@@`/`@` variables, and refuses the rest
with a syntax error. One of them would change what the other accepts; speed is no reason (on
statements a CN routes the server's is as fast)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from cdc.cn_protocol.errors import CatalogueError, RoutingError


class Token(NamedTuple):  # a tuple: created for every token of every statement, cheaply
    kind: str  # "word", "qword" (backticked), "str", "num", "op", "param"
    text: str  # the raw source text
    start: int
    end: int
    value: object = None  # the decoded value of "str"/"num"/"word"/"qword"

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words

    @property
    def name(self) -> str | None:
        """An identifier's name (backticks removed), or None."""
        if self.kind in ("word", "qword"):
            return str(self.value)
        return None


_ESCAPES = {"0": "\0", "n": "\n", "r": "\r", "t": "\t", "b": "\b", "Z": "\x1a"}


# The same tokens as `_tokenize_chars` for ASCII text, one regex step per token instead of a
# Python step per character (every statement is tokenized). Groups in `_tokenize_chars`'s order.
_ASCII_TOKEN = re.compile(
    r"""(?P<skip>\s+|/\*.*?(?:\*/|\Z)|(?:--|\#)[^\n]*\n?)
    |(?P<quote>['"])
    |(?P<qword>`[^`]*`)
    |(?P<num>(?:[0-9]|\.[0-9])[A-Za-z0-9.]*)
    |(?P<word>[A-Za-z_@$][A-Za-z0-9_@$]*)
    |(?P<param>%s)
    |(?P<op><=|>=|<>|!=|:=|.)""",
    re.DOTALL | re.VERBOSE,
)


def tokenize(sql: str) -> list[Token]:
    if not sql.isascii():
        return _tokenize_chars(sql)
    tokens: list[Token] = []
    append = tokens.append
    match = _ASCII_TOKEN.match
    i, n = 0, len(sql)
    while i < n:
        m = match(sql, i)
        kind, end = m.lastgroup, m.end()
        if kind == "skip":
            pass
        elif kind == "quote":
            end, value = _read_string(sql, i)
            append(Token("str", sql[i:end], i, end, value))
        elif kind == "word":
            word = m.group()
            # _binary'..' / X'..' / _utf8mb4'..' are one literal.
            if end < n and sql[end] == "'" and (word[0] == "_" or word in ("X", "x", "B", "b")):
                end, value = _read_string(sql, end)
                append(Token("str", sql[i:end], i, end, value))
            else:
                append(Token("word", word, i, end, word))
        elif kind == "num":
            text = m.group()
            append(Token("num", text, i, end, text))
        elif kind == "qword":
            append(Token("qword", sql[i:end], i, end, sql[i + 1 : end - 1]))
        elif kind == "param":
            append(Token("param", "%s", i, end))
        elif sql[i] == "`":
            raise RoutingError(f"unterminated `identifier` in: {sql[:200]}")
        else:
            append(Token("op", m.group(), i, end))
        i = end
    return tokens


def _tokenize_chars(sql: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif sql.startswith("--", i) or c == "#":
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif c in "'\"":
            end, value = _read_string(sql, i)
            tokens.append(Token("str", sql[i:end], i, end, value))
            i = end
        elif c == "`":
            end = sql.find("`", i + 1)
            if end < 0:
                raise RoutingError(f"unterminated `identifier` in: {sql[:200]}")
            tokens.append(Token("qword", sql[i : end + 1], i, end + 1, sql[i + 1 : end]))
            i = end + 1
        elif c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit()):
            j = i
            while j < n and (sql[j].isalnum() or sql[j] == "."):
                j += 1
            tokens.append(Token("num", sql[i:j], i, j, sql[i:j]))
            i = j
        elif c.isalpha() or c in "_@$":
            j = i
            while j < n and (sql[j].isalnum() or sql[j] in "_@$"):
                j += 1
            word = sql[i:j]
            # _binary'..' / X'..' / _utf8mb4'..' are one literal.
            if j < n and sql[j] == "'" and (word.startswith("_") or word.upper() in ("X", "B")):
                end, value = _read_string(sql, j)
                tokens.append(Token("str", sql[i:end], i, end, value))
                i = end
                continue
            tokens.append(Token("word", word, i, j, word))
            i = j
        elif sql.startswith("%s", i):
            tokens.append(Token("param", "%s", i, i + 2))
            i += 2
        else:
            two = sql[i : i + 2]
            if two in ("<=", ">=", "<>", "!=", ":="):
                tokens.append(Token("op", two, i, i + 2))
                i += 2
            else:
                tokens.append(Token("op", c, i, i + 1))
                i += 1
    return tokens


def _read_string(sql: str, i: int) -> tuple[int, str]:
    """Read the quoted literal starting at `i`; return (end offset, decoded text)."""
    quote, j, n, out = sql[i], i + 1, len(sql), []
    while True:
        if j >= n:
            raise RoutingError(f"unterminated string literal in: {sql[:200]}")
        ch = sql[j]
        if ch == "\\" and j + 1 < n:
            out.append(_ESCAPES.get(sql[j + 1], sql[j + 1]))
            j += 2
        elif ch == quote and sql[j + 1 : j + 2] == quote:
            out.append(quote)
            j += 2
        elif ch == quote:
            return j + 1, "".join(out)
        else:
            out.append(ch)
            j += 1


def literal_value(tok: Token) -> object:
    """The value of a literal token, for hashing a shard key; raises on anything else."""
    if tok.kind == "str":
        if tok.text[:1] in "xX" and tok.text[1:2] == "'":
            return bytes.fromhex(str(tok.value))
        return tok.value
    if tok.kind == "num":
        return tok.value
    raise RoutingError(f"the shard key must be compared with a literal value, got {tok.text!r}")


@dataclass(slots=True)
class DdlTarget:
    verb: str  # CREATE / DROP / ALTER / TRUNCATE
    db: str
    table: str
    name_start: int
    name_end: int
    if_clause: bool  # IF [NOT] EXISTS


def parse_ddl(sql: str, default_db: str | None) -> DdlTarget:
    tokens = tokenize(sql)
    words = [t.text.upper() for t in tokens[:6]]
    if not words or words[0] not in ("CREATE", "DROP", "ALTER", "TRUNCATE"):
        raise CatalogueError(f"not a supported DDL statement: {sql[:200]}")
    i = 1
    if i < len(tokens) and tokens[i].is_word("TABLE"):
        i += 1
    elif words[0] != "TRUNCATE":
        raise CatalogueError(f"only TABLE DDL is supported: {sql[:200]}")
    if_clause = False
    if i < len(tokens) and tokens[i].is_word("IF"):
        if_clause = True
        i += 3 if tokens[i + 1].is_word("NOT") else 2
    first = tokens[i]
    if i + 2 < len(tokens) and tokens[i + 1].text == "." and tokens[i + 2].name is not None:
        db, name, end = first.name, tokens[i + 2].name, tokens[i + 2].end
    elif default_db:
        db, name, end = default_db, first.name, first.end
    else:
        raise CatalogueError(f"table `{first.name}` has no database; write db.table: {sql[:200]}")
    return DdlTarget(words[0], db.lower(), name.lower(), first.start, end, if_clause)
