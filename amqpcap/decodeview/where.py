"""`--where EXPR`: a small, safe expression language over a record's JSON fields.

    args.reply_code >= 400 and method == "channel.close"
    method ~ "basic.*" and not args.redelivered
    message.properties.headers["x-death"] != null
    dir == "C>S" and channel in [1, 2, 3]
    detail =~ "^[0-9]+ bytes not captured"

Grammar (keywords lower case; no arithmetic, no calls, nothing is evaluated as Python):

    expr    := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | test
    test    := value [op value]              a value alone: its truthiness (null, false, 0, "", {} are false)
    op      := "==" | "!=" | "<" | "<=" | ">" | ">=" | "~" (glob) | "=~" (regex search) | "in" | "not" "in"
    value   := path | string | number | "true" | "false" | "null" | "[" [value ("," value)*] "]" | "(" expr ")"
    path    := name ("." name | "[" (string | integer) "]")*      name: [A-Za-z_][A-Za-z0-9_-]*

A path names a record key (`method`, `args.reply_code`, `message.body_size`...; docs/decode.md lists
them); a missing key is null. `==`/`!=` compare any values (1 == 1.0, true != 1); the order
operators compare numbers with numbers and strings with strings and are false otherwise (never an
error); `~` matches a string against a glob (fnmatch, case-sensitive); `=~` searches a string with
a Python regular expression; `in` tests membership in a list or a table's keys, or a substring.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Callable, Mapping

Getter = Callable[[Mapping], Any]


class WhereError(ValueError):
    """A bad expression: the message says what and where (one line)."""


_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>==|!=|<=|>=|=~|<|>|~|\(|\)|\[|\]|,|\.)
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
""", re.VERBOSE)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise WhereError(f"unexpected {text[pos]!r} at column {pos + 1}")
        kind, token = match.lastgroup, match.group()
        if kind == "number":
            out.append(("value", float(token) if any(c in token for c in ".eE") else int(token), pos))
        elif kind == "string":
            out.append(("value", _unquote(token[1:-1], pos), pos))
        elif kind == "name" and token in _KEYWORDS:
            if token in ("true", "false", "null"):
                out.append(("value", {"true": True, "false": False, "null": None}[token], pos))
            else:
                out.append(("keyword", token, pos))
        elif kind != "space":
            out.append((kind, token, pos))
        pos = match.end()
    out.append(("end", None, len(text)))
    return out


def _unquote(body: str, pos: int) -> str:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 1
            if body[i] not in _ESCAPES:
                raise WhereError(f"unknown escape \\{body[i]} in the string at column {pos + 1}")
            c = _ESCAPES[body[i]]
        out.append(c)
        i += 1
    return "".join(out)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, Any, int]:
        return self.tokens[self.i]

    def take(self) -> tuple[str, Any, int]:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def expect(self, kind: str, value: str) -> None:
        token = self.take()
        if token[0] != kind or token[1] != value:
            raise WhereError(f"expected {value!r} at column {token[2] + 1}, found {_shown(token)}")

    def at(self, kind: str, value: str | None = None) -> bool:
        token = self.peek()
        return token[0] == kind and (value is None or token[1] == value)

    def parse(self) -> Getter:
        if self.at("end"):
            raise WhereError("empty expression")
        node = self.expr()
        if not self.at("end"):
            token = self.peek()
            raise WhereError(f"unexpected {_shown(token)} at column {token[2] + 1} (missing 'and'/'or'?)")
        return node

    def expr(self) -> Getter:
        parts = [self.conjunction()]
        while self.at("keyword", "or"):
            self.take()
            parts.append(self.conjunction())
        if len(parts) == 1:
            return parts[0]
        return lambda r: any(part(r) for part in parts)

    def conjunction(self) -> Getter:
        parts = [self.negation()]
        while self.at("keyword", "and"):
            self.take()
            parts.append(self.negation())
        if len(parts) == 1:
            return parts[0]
        return lambda r: all(part(r) for part in parts)

    def negation(self) -> Getter:
        if self.at("keyword", "not"):
            self.take()
            inner = self.negation()
            return lambda r: not inner(r)
        return self.test()

    def test(self) -> Getter:
        left = self.value()
        token = self.peek()
        if token[0] == "op" and token[1] in _OPERATORS:
            self.take()
            op = token[1]
            if op in ("~", "=~"):
                kind, pattern, pos = self.take()
                if kind != "value" or not isinstance(pattern, str):
                    raise WhereError(f"'{op}' at column {token[2] + 1} takes a string literal on its right")
                return _matcher(op, left, pattern)
            right = self.value()
            return _comparison(_COMPARE[op], left, right)
        if token[0] == "keyword" and token[1] in ("in", "not"):
            self.take()
            negate = token[1] == "not"
            if negate:
                self.expect("keyword", "in")
            right = self.value()
            if negate:
                return lambda r: not _contains(right(r), left(r))
            return lambda r: _contains(right(r), left(r))
        return lambda r: bool(left(r))

    def value(self) -> Getter:
        kind, token, pos = self.take()
        if kind == "value":
            return lambda r: token
        if kind == "op" and token == "(":
            inner = self.expr()
            self.expect("op", ")")
            return inner
        if kind == "op" and token == "[":
            items: list[Getter] = []
            if not self.at("op", "]"):
                items.append(self.value())
                while self.at("op", ","):
                    self.take()
                    items.append(self.value())
            self.expect("op", "]")
            return lambda r: [item(r) for item in items]
        if kind == "name":
            return self.path(token)
        raise WhereError(f"expected a field name or a value at column {pos + 1}, found {_shown((kind, token, pos))}")

    def path(self, first: str) -> Getter:
        steps: list[str | int] = [first]
        while self.at("op", ".") or self.at("op", "["):
            _, op, pos = self.take()
            if op == ".":
                kind, token, pos = self.take()
                if kind not in ("name", "keyword"):
                    raise WhereError(f"expected a field name after '.' at column {pos + 1}")
                steps.append(token)
            else:
                kind, token, pos = self.take()
                if kind != "value" or not isinstance(token, (str, int)) or isinstance(token, bool):
                    raise WhereError(f"expected a string or an integer inside [] at column {pos + 1}")
                steps.append(token)
                self.expect("op", "]")
        key, rest = steps[0], steps[1:]
        if not rest:
            return lambda r: r.get(key)
        return lambda r: _walk(r.get(key), rest)  # (a record: a Record, or a dict of one)


def _walk(value, steps):
    for step in steps:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and isinstance(step, int) and -len(value) <= step < len(value):
            value = value[step]
        else:
            return None
    return value


def _shown(token) -> str:
    kind, value, _ = token
    return "the end" if kind == "end" else repr(value)


def _same_kind(a, b) -> bool:
    """Ordered comparison is defined between numbers, or between strings."""
    if isinstance(a, str):
        return isinstance(b, str)
    return (isinstance(a, (int, float)) and not isinstance(a, bool)
            and isinstance(b, (int, float)) and not isinstance(b, bool))


def _eq(a, b) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):  # true is not 1
        return False
    return a == b


_COMPARE = {
    "==": _eq,
    "!=": lambda a, b: not _eq(a, b),
    "<": lambda a, b: _same_kind(a, b) and a < b,
    "<=": lambda a, b: _same_kind(a, b) and a <= b,
    ">": lambda a, b: _same_kind(a, b) and a > b,
    ">=": lambda a, b: _same_kind(a, b) and a >= b,
}
_OPERATORS = {*_COMPARE, "~", "=~"}


def _comparison(compare, left: Getter, right: Getter) -> Getter:
    return lambda r: compare(left(r), right(r))


def _matcher(op: str, left: Getter, pattern: str) -> Getter:
    try:
        compiled = re.compile(fnmatch.translate(pattern) if op == "~" else pattern)
    except re.error as error:
        raise WhereError(f"bad regular expression {pattern!r}: {error}") from None
    search = compiled.match if op == "~" else compiled.search

    def match(r):
        value = left(r)
        return isinstance(value, str) and search(value) is not None
    return match


def _contains(container, item) -> bool:
    if isinstance(container, list):
        return any(_eq(item, element) for element in container)
    if isinstance(container, dict):
        return isinstance(item, str) and item in container
    if isinstance(container, str):
        return isinstance(item, str) and item in container
    return False


def compile_where(text: str) -> Callable[[Mapping], bool]:
    """A predicate over records, or WhereError."""
    if len(text) > 10_000:
        raise WhereError("expression too long")
    try:
        node = _Parser(text).parse()
    except RecursionError:
        raise WhereError("expression nested too deeply") from None
    return lambda record: bool(node(record))
