"""Helpers shared by test folders (one module: a folder's conftest is for its own fixtures)."""

from __future__ import annotations

import base64


def encodings(secret: bytes) -> dict[str, bytes]:
    """The forms in which a secret could sit in an output: plain, hex (both cases), UTF-16 (both
    byte orders) and base64 at each of the three alignments it can have inside a longer encoded
    value (the part of the encoding that depends on the secret's bytes alone)."""
    forms = {"plain": secret, "hex": secret.hex().encode(), "HEX": secret.hex().upper().encode(),
             "utf-16-le": secret.decode("latin-1").encode("utf-16-le"),
             "utf-16-be": secret.decode("latin-1").encode("utf-16-be")}
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret)
        first = 4 if shift else 0  # the first group mixes in the bytes before the secret
        whole = 4 * ((shift + len(secret)) // 3)  # groups made of the secret's bytes (and the shift)
        forms[f"base64+{shift}"] = encoded[first:whole]
    return forms


def leaks(data: bytes, secret: bytes, window: int = 4) -> str | None:
    """Where `data` holds the secret: any `window` consecutive bytes of it as they are, or the whole
    secret in any of its encodings. None when it holds nothing of it."""
    for start in range(max(1, len(secret) - window + 1)):
        if secret[start:start + window] in data:
            return f"bytes {start}..{start + window} of the secret, plain"
    for name, form in encodings(secret).items():
        if len(form) >= window and form in data:
            return f"the secret, {name}"
    return None


def needles(secret: bytes, name: str, window: int = 8) -> dict[bytes, str]:
    """What `find_all` looks for of one secret: every `window` bytes of it as they are, and the
    whole secret in each of its encodings."""
    out = {secret[start:start + window]: f"{name}: bytes {start}..{start + window}, plain"
           for start in range(max(1, len(secret) - window + 1))}
    for form, encoded in encodings(secret).items():
        if len(encoded) >= window:
            out.setdefault(encoded, f"{name}: the whole of it, {form}")
    return out


class Sweep:
    """Finds any of many byte strings (`wanted`: each of 8 bytes or more, by name) in data, in one
    pass over its 8-byte words at each of the 8 alignments: a word whose low 24 bits are some
    string's first word's is a candidate (a table lookup), checked in full. (Thousands of secrets
    over a lake's files: a search per secret and file would take minutes.)"""

    def __init__(self, wanted: dict[bytes, str]) -> None:
        import numpy as np
        self.np = np
        self.by_prefix: dict[int, list] = {}
        for needle, name in wanted.items():
            assert len(needle) >= 8, name
            self.by_prefix.setdefault(int.from_bytes(needle[:8], "little"), []).append((needle, name))
        self.low = np.uint64((1 << 24) - 1)
        self.table = np.zeros(1 << 24, dtype=bool)
        prefixes = np.fromiter(self.by_prefix, dtype=np.uint64, count=len(self.by_prefix))
        self.table[(prefixes & self.low).astype(np.int64)] = True

    def by_prefix_names(self) -> list[str]:
        """The names of every wanted string."""
        return [name for entries in self.by_prefix.values() for _, name in entries]

    def find(self, data: bytes) -> list[str]:
        """The names of the wanted strings that `data` holds."""
        octets = self.np.frombuffer(data, dtype=self.np.uint8)
        found = []
        for shift in range(8):
            words = (len(data) - shift) // 8
            if words <= 0:
                break
            values = octets[shift:shift + 8 * words].view("<u8")
            for index in self.np.flatnonzero(self.table[(values & self.low).astype(self.np.int64)]):
                at, first = shift + 8 * int(index), int(values[index])
                found += [name for needle, name in self.by_prefix.get(first, ()) if data.startswith(needle, at)]
        return found
