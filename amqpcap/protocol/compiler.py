"""Compile the spec's field lists into decoder functions, once per method and content class.

The generic alternative (a loop over fields dispatching on type) costs a function call and a dict
lookup per field; generating straight-line source per method from the spec removes both and folds
runs of fixed-width fields into one struct unpack. The knowledge still comes only from the spec:
this module knows wire types, never a method.

A compiled method decoder has the signature (payload, offset, warnings) -> (args, next offset);
a property decoder (payload, offset, warnings, flag_words) -> (properties, next offset).
Reserved fields are decoded (they take wire space) but left out of the result.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterable

from amqpcap.protocol.fieldtable import TEXT_ERRORS, FieldTableCodec, Timestamp
from amqpcap.protocol.spec import Field

_FIXED = {"octet": "B", "short": "H", "long": "I", "longlong": "Q", "timestamp": "Q"}

MethodDecoder = Callable[[bytes, int, "list | None"], tuple[dict, int]]
PropertyDecoder = Callable[[bytes, int, "list | None", list], tuple[dict, int]]


class _Source:
    """Accumulates generated lines and the constants they refer to."""

    def __init__(self, tables: FieldTableCodec) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, object] = {"_table": tables.decode_table, "_U32": struct.Struct(">I").unpack_from,
                                             "_TEXT": TEXT_ERRORS, "_TS": Timestamp}
        self._structs = 0

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)

    def struct(self, fmt: str) -> str:
        name = f"_S{self._structs}"
        self._structs += 1
        self.namespace[name] = struct.Struct(">" + fmt).unpack_from
        return name

    def function(self, name: str, signature: str) -> Callable:
        text = f"def {name}({signature}):\n" + "\n".join(self.lines) + "\n"
        exec(compile(text, f"<amqpcap {name}>", "exec"), self.namespace)
        function = self.namespace[name]
        function.__source__ = text  # for debugging: print(decoder.__source__)
        return function


def _emit_value(src: _Source, field: Field, var: str, raw: bool, indent: int = 1) -> None:
    """One variable-width value at offset `o`, leaving `o` after it."""
    if field.type in ("shortstr", "longstr"):
        if field.type == "shortstr":
            src.emit("n = p[o]", indent)
            src.emit("o += 1", indent)
        else:
            src.emit("n = _U32(p, o)[0]", indent)
            src.emit("o += 4", indent)
        if raw:
            src.emit(f"{var} = p[o:o + n]", indent)
        else:  # strict first (cheapest), invalid UTF-8 kept visible as \xNN
            src.emit("try:", indent)
            src.emit(f"{var} = p[o:o + n].decode()", indent + 1)
            src.emit("except UnicodeDecodeError:", indent)
            src.emit(f"{var} = p[o:o + n].decode('utf-8', _TEXT)", indent + 1)
        src.emit("o += n", indent)
    elif field.type == "table":
        src.emit(f"{var}, o = _table(p, o, w)", indent)
    elif field.type == "content":
        # 0-9 (work in progress) inline content: octet 0 = body follows, 1 = a reference follows.
        # Bodies are not kept: record which it was and how long.
        src.emit("n = _U32(p, o + 1)[0]", indent)
        src.emit(f"{var} = {{'kind': 'reference' if p[o] else 'inline', 'size': n}}", indent)
        src.emit("o += 5 + n", indent)
    else:
        raise AssertionError(f"not a variable-width type: {field.type}")


def compile_fields(fields: Iterable[Field], name: str, tables: FieldTableCodec,
                   raw_keys: frozenset[str] = frozenset()) -> MethodDecoder:
    """A decoder for a method's arguments. Fields in `raw_keys` stay bytes (used for secrets,
    which redaction consumes before anything else sees them)."""
    fields = list(fields)
    src = _Source(tables)
    out: list[tuple[str, str]] = []  # (key, variable) for non-reserved fields
    i = 0
    while i < len(fields):
        field = fields[i]
        if field.type in _FIXED:
            run = [field]
            while i + len(run) < len(fields) and fields[i + len(run)].type in _FIXED:
                run.append(fields[i + len(run)])
            fmt = "".join(_FIXED[f.type] for f in run)
            names = [f"v{i + k}" for k in range(len(run))]
            src.emit(f"{', '.join(names)}{',' if len(run) == 1 else ''} = {src.struct(fmt)}(p, o)")
            src.emit(f"o += {struct.calcsize('>' + fmt)}")
            out += [(f.key, f"_TS({v})" if f.type == "timestamp" else v) for f, v in zip(run, names)
                    if not f.reserved]
            i += len(run)
        elif field.type == "bit":
            # Consecutive bits pack LSB-first into octets; any other field ends the run.
            run = [field]
            while i + len(run) < len(fields) and fields[i + len(run)].type == "bit":
                run.append(fields[i + len(run)])
            for k, bit_field in enumerate(run):
                if k % 8 == 0:
                    src.emit(f"b = p[o + {k // 8}]")
                if not bit_field.reserved:
                    src.emit(f"v{i + k} = b & {1 << (k % 8)} != 0")
                    out.append((bit_field.key, f"v{i + k}"))
            src.emit(f"o += {(len(run) + 7) // 8}")
            i += len(run)
        else:
            _emit_value(src, field, f"v{i}", field.key in raw_keys)
            if not field.reserved:
                out.append((field.key, f"v{i}"))
            i += 1
    src.emit("return {" + ", ".join(f"{k!r}: {v}" for k, v in out) + "}, o")
    return src.function(f"decode_{_identifier(name)}", "p, o, w")


def compile_properties(properties: Iterable[Field], name: str,
                       tables: FieldTableCodec) -> tuple[PropertyDecoder, int, list[int]]:
    """A decoder for a content class's properties.

    Property k (0-based, in spec order) is flagged by bit 15 - (k % 15) of flag word k // 15; bit 0
    of a word says another word follows. Only flagged properties are on the wire, in order; bit
    properties exist only as their flag. Returns the decoder, the number of flag words the class
    uses and, per word, the mask of bits the class defines (the rest are unknown properties).
    """
    properties = list(properties)
    words, known = flag_layout(properties)
    src = _Source(tables)
    src.emit("r = {}")
    for k, prop in enumerate(properties):
        word, mask = k // 15, 1 << (15 - k % 15)
        test = f"f[{word}] & {mask:#06x}"
        if prop.type == "bit":
            src.emit(f"r[{prop.key!r}] = {test} != 0")
            continue
        src.emit(f"if {test}:")
        if prop.type in _FIXED:
            fmt = _FIXED[prop.type]
            value = f"{src.struct(fmt)}(p, o)[0]"
            src.emit(f"r[{prop.key!r}] = {f'_TS({value})' if prop.type == 'timestamp' else value}", 2)
            src.emit(f"o += {struct.calcsize('>' + fmt)}", 2)
        else:
            _emit_value(src, prop, "v", raw=False, indent=2)
            src.emit(f"r[{prop.key!r}] = v", 2)
    src.emit("return r, o")
    return src.function(f"properties_{_identifier(name)}", "p, o, w, f"), words, known


def flag_layout(properties: list[Field]) -> tuple[int, list[int]]:
    """(flag words the class uses, per word the mask of bits it defines)."""
    words = max(1, (len(properties) + 14) // 15)
    known = [0] * words
    for k in range(len(properties)):
        known[k // 15] |= 1 << (15 - k % 15)
    return words, known


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
