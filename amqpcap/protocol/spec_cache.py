"""Parsed specs kept between runs: reading the two bundled XML specs (and importing xml.etree to do
it) cost every `amqpcap` start about as much as all of the decoder's own modules.

A spec's plain form (amqpcap.protocol.spec says what it holds) is kept under the SHA-256 of its XML bytes,
as marshal data, the format of Python's own bytecode caches, in the user's cache directory:
AMQPCAP_CACHE_DIR, else $XDG_CACHE_HOME/amqpcap, else ~/.cache/amqpcap (AMQPCAP_CACHE_DIR set empty
turns it off). A file that is missing, unreadable or damaged is read as none; it is written aside
and renamed into place, so a reader never sees half of it; a directory that cannot be written
only means the XML is parsed each time.
"""

from __future__ import annotations

import hashlib
import marshal
import os

FORMAT = 1  # of the files (marshal's own version is part of it: Python's)


def directory() -> str | None:
    """Where cached specs go (None: nowhere)."""
    chosen = os.environ.get("AMQPCAP_CACHE_DIR")
    if chosen is not None:
        return chosen or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "amqpcap")


def _path(xml: bytes) -> str | None:
    folder = directory()
    if folder is None:
        return None
    digest = hashlib.sha256(xml).hexdigest()[:40]
    return os.path.join(folder, f"spec-{digest}-{FORMAT}.{marshal.version}.marshal")


def load(xml: bytes):
    """The plain form kept for a spec's XML bytes, or None."""
    path = _path(xml)
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            return marshal.loads(file.read())
    except (OSError, EOFError, ValueError, TypeError):  # missing, unreadable, damaged
        return None


def store(xml: bytes, plain) -> None:
    """Keeps a spec's plain form (best effort: a failure is not an error)."""
    path = _path(xml)
    if path is None:
        return
    aside = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(aside, "wb") as file:
            file.write(marshal.dumps(plain))
        os.replace(aside, path)
    except OSError:
        try:
            os.remove(aside)
        except OSError:
            pass
