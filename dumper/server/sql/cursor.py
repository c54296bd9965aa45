"""The parser's cursor over a statement's tokens: keywords, names, literals, expressions and
WHERE conditions, shared by the statement parsers (`parser.py`, `parse_show.py`)."""

from __future__ import annotations

from dumper.server.handlers import SqlError
from dumper.server.sql.lexer import MAX_DIGITS, UINT64_MAX, Token, tokenize
from dumper.server.sql.statements import Condition, Expr, Func, Literal, SysVar, UserVar

# Parentheses an expression may nest (MySQL's own parser gives up on deep nesting too).
MAX_NESTING = 64


class LiteralError(SqlError):
    """A literal out of range: reported as is, never retried as another statement form."""


class Cursor:
    def __init__(self, stmt: str) -> None:
        self.stmt = stmt
        self.toks = tokenize(stmt)
        self.i = 0
        self.depth = 0  # parentheses open in the expression being read

    # cursor helpers
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at_end(self) -> bool:
        return self.i >= len(self.toks)

    def error(self) -> SqlError:
        tok = self.peek()
        near = self.stmt[tok.start : tok.start + 60] if tok else ""
        return SqlError(
            "You have an error in your SQL syntax, or this statement is not supported by the "
            f"binlog server (see docs/dumper.md), near '{near}'"
        )

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.error()
        self.i += 1
        return tok

    def accept(self, *words: str) -> bool:
        """Consume the keyword sequence `words` if it comes next."""
        for k, w in enumerate(words):
            tok = self.peek(k)
            if tok is None or (tok.word() != w and not (tok.kind == "op" and tok.text == w)):
                return False
        self.i += len(words)
        return True

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error()

    def end(self) -> None:
        if not self.at_end():
            raise self.error()

    def name(self) -> str:
        tok = self.next()
        if tok.kind not in ("ident", "ident_q"):
            self.i -= 1
            raise self.error()
        return tok.value

    def string(self) -> str:
        tok = self.next()
        if tok.kind != "str":
            self.i -= 1
            raise self.error()
        return tok.value

    def string_or_name(self) -> str:
        tok = self.peek()
        return self.string() if tok is not None and tok.kind == "str" else self.name()

    def integer(self) -> int:
        """An unsigned integer literal up to 2^64 - 1 (LIMIT, FROM, KILL): MySQL's grammar has
        no larger integer there, so a larger one is a syntax error, as in MySQL."""
        tok = self.next()
        if tok.kind != "num" or not tok.text.isdigit():
            self.i -= 1
            raise self.error()
        text = tok.text.lstrip("0") or "0"
        if len(text) > 20 or int(text) > UINT64_MAX:
            self.i -= 1
            raise self.error()
        return int(text)

    def limit(self) -> tuple[int | None, int]:
        """After LIMIT: `[offset,] row_count` as (offset or None, row_count); the caller
        decides whether `OFFSET n` may follow (SELECT: yes, SHOW BINLOG EVENTS: no)."""
        first = self.integer()
        if self.accept(","):
            return first, self.integer()
        return None, first

    def qualified(self) -> tuple[str | None, str]:
        first = self.name()
        if self.accept("."):
            return first, self.name()
        return None, first

    # expressions
    def expr(self) -> Expr:
        tok = self.next()
        if tok.kind == "str":
            value: str = tok.value
            while (nxt := self.peek()) is not None and nxt.kind == "str":  # 'a' 'b' concatenates
                value += self.next().value
            return Literal(value)
        if tok.kind == "num":
            return Literal(number_value(tok.text))
        if tok.kind == "op" and tok.text == "-":
            # A run of signs read in a loop, not by recursion: `SET @x = ------…1` of any
            # length is a number, never a RecursionError (the fuzz test's long inputs).
            negate = True
            while (nxt := self.peek()) is not None and nxt.kind == "op" and nxt.text == "-":
                self.next()
                negate = not negate
            inner = self.expr()
            if isinstance(inner, Literal) and isinstance(inner.value, int | float):
                return Literal(-inner.value if negate else inner.value)
            raise self.error()
        if tok.kind == "op" and tok.text == "(":
            if self.depth >= MAX_NESTING:  # as deep as Python's stack allows is not the limit
                raise SqlError(f"Expression nested deeper than {MAX_NESTING} parentheses")
            self.depth += 1
            inner = self.expr()
            self.depth -= 1
            self.expect(")")
            return inner
        if tok.kind == "sysvar":
            scope, _, name = tok.value.rpartition(".")
            return SysVar("session" if scope == "local" else scope, name)
        if tok.kind == "uservar":
            return UserVar(tok.value)
        if tok.kind == "ident":
            word = tok.word()
            if word == "NULL":
                return Literal(None)
            if word in ("TRUE", "FALSE"):
                return Literal(1 if word == "TRUE" else 0)
            if self.accept("("):
                args: list[Expr] = []
                if not self.accept(")"):
                    args.append(self.expr())
                    while self.accept(","):
                        args.append(self.expr())
                    self.expect(")")
                return Func(word, tuple(args))
            if word in ("CURRENT_USER", "CURRENT_TIMESTAMP", "LOCALTIME", "LOCALTIMESTAMP"):
                return Func(word)
            if word in ("ON", "OFF"):  # SET autocommit = ON
                return Literal(word)
        self.i -= 1
        raise self.error()

    def _condition(self) -> Condition:
        col = self.name()
        if self.accept("."):
            col = self.name()
        col = col.lower()
        if self.accept("="):
            if self.accept("DATABASE", "(", ")"):  # mariadb-dump: table_schema = DATABASE()
                return Condition(col, "=DATABASE()", [])
            return Condition(col, "=", [self._literal_text()])
        if self.accept("LIKE"):
            return Condition(col, "LIKE", [self.string()])
        if self.accept("IN"):
            self.expect("(")
            values = [self._literal_text()]
            while self.accept(","):
                values.append(self._literal_text())
            self.expect(")")
            return Condition(col, "IN", values)
        raise self.error()

    def _literal_text(self) -> str:
        expr = self.expr()
        if not isinstance(expr, Literal) or expr.value is None:
            raise self.error()
        return str(expr.value)


def number_value(text: str) -> int | float:
    """A number literal's value, or SqlError 1064 — never Python's own errors (int() refuses
    more than 4300 digits with ValueError; float() overflows to inf)."""
    if text.isdigit():
        if len(text.lstrip("0")) > MAX_DIGITS:
            raise LiteralError(
                f"Number literal '{text[:20]}...' too long: the binlog server accepts at most "
                f"{MAX_DIGITS} digits (MySQL's DECIMAL precision)"
            )
        return int(text)
    value = float(text) if len(text) <= 2 * MAX_DIGITS else float("inf")
    if value == float("inf"):
        raise LiteralError(
            f"Illegal double '{text[:40]}' value found during parsing", 1367, "22007"
        )
    return value
