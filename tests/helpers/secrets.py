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
