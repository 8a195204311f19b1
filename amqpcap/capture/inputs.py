"""Which capture files the inputs name (one rule for `amqpcap decode` and the job), on any filesystem
pyarrow can open; naming them canonically, and opening them on executors.

Inputs are files, directories (searched recursively) and globs, as local paths or URIs
(`file://`, `s3://`, `hdfs://`, `gs://`...). Every file is named by its absolute URI
(`file:///captures/a.pcap` however the path was spelled), so a rerun replaces its rows whatever the
spelling; its content fingerprint (`fingerprint`) recognises the same bytes under another name.
The driver only lists files (names and sizes); executors open and read them.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import os
from dataclasses import dataclass
from urllib.parse import quote, unquote

# What a directory or a URI folder yields (a file named on its own is taken whatever its suffix)
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp", ".pcap.gz", ".pcapng.gz", ".cap.gz")
FINGERPRINT_SPAN = 1 << 20  # bytes hashed at each end of a file


@dataclass(frozen=True)
class InputFile:
    uri: str  # canonical: file:///absolute/path for local files, else scheme://...
    size: int  # -1 when the file does not exist


def canonical_uri(item: str) -> str:
    if "://" in item:
        scheme, rest = item.split("://", 1)
        if scheme != "file":
            return item
        item = unquote(rest)
    return "file://" + quote(os.path.abspath(os.path.expanduser(item)))


def local_path(uri: str) -> str | None:
    """The local path of a file:// URI (or of a plain path), None for other schemes."""
    if uri.startswith("file://"):
        return unquote(uri[len("file://"):])
    return None if "://" in uri else uri


def list_inputs(inputs: list[str], suffixes: tuple[str, ...] | None = CAPTURE_SUFFIXES) -> list[InputFile]:
    """Every capture file the inputs name, sorted and without duplicates. A named file is taken
    whatever its suffix; directories and globs yield files with capture suffixes (`suffixes`;
    None: every file but hidden ones, as for key logs). A name that matches nothing is kept, so
    the job can report it as failed."""
    found: dict[str, InputFile] = {}
    for item in inputs:
        local = local_path(item)
        for entry in (_list_local(local, suffixes) if local is not None else _list_uri(item, suffixes)):
            found.setdefault(entry.uri, entry)
    return sorted(found.values(), key=lambda f: f.uri)


def expand_inputs(inputs: list[str]) -> list[str]:
    """Paths and URIs, in the order given: files as named, directories to the capture files inside
    (recursively, sorted), globs to the files they match (sorted). `amqpcap decode`'s listing."""
    return [path for item in inputs
            for path in (_expand_local(item) if local_path(item) is not None or item == "-"
                         else [entry.uri for entry in _list_uri(item)])]


def _expand_local(item: str, suffixes: tuple[str, ...] | None = CAPTURE_SUFFIXES) -> list[str]:
    if os.path.isdir(item):
        return [os.path.join(root, name) for root, _, names in sorted(os.walk(item)) for name in sorted(names)
                if _listed(name, suffixes)]
    if any(c in item for c in "*?[") and not os.path.exists(item):
        return sorted(p for p in glob.glob(item, recursive=True) if os.path.isfile(p))
    return [item]


def _listed(name: str, suffixes: tuple[str, ...] | None) -> bool:
    """Whether a directory's file is among what it yields."""
    return name.endswith(suffixes) if suffixes is not None else not name.startswith(".")


def _list_local(item: str, suffixes: tuple[str, ...] | None = CAPTURE_SUFFIXES) -> list[InputFile]:
    return [InputFile(canonical_uri(path), os.path.getsize(path) if os.path.isfile(path) else -1)
            for path in _expand_local(item, suffixes)]


def _list_uri(item: str, suffixes: tuple[str, ...] | None = CAPTURE_SUFFIXES) -> list[InputFile]:
    import pyarrow.fs as pafs
    scheme = item.split("://", 1)[0]
    pattern = any(c in item for c in "*?[")
    base = item.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0].rsplit("/", 1)[0] if pattern else item
    filesystem, root = pafs.FileSystem.from_uri(base)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.File and not pattern:
        return [InputFile(item, info.size)]
    if info.type == pafs.FileType.NotFound:
        return [InputFile(item, -1)]
    files = []
    for entry in filesystem.get_file_info(pafs.FileSelector(root, recursive=True)):
        if entry.type != pafs.FileType.File:
            continue
        uri = f"{scheme}://{entry.path}"
        if pattern and not fnmatch.fnmatch(uri, item):
            continue
        if not pattern and not _listed(entry.path.rsplit("/", 1)[-1], suffixes):
            continue
        files.append(InputFile(uri, entry.size))
    return files


def open_input(uri: str):
    """A seekable binary file for a local path or a URI (executor side)."""
    local = local_path(uri)
    if local is not None:
        return open(local, "rb")
    import pyarrow.fs as pafs
    filesystem, path = pafs.FileSystem.from_uri(uri)
    return filesystem.open_input_file(path)


def fingerprint(uri: str, size: int) -> str | None:
    """SHA-256 of the file's size and its first and last MiB: the same bytes under another name
    are recognised (a renamed or copied capture), at the cost of reading 2 MiB."""
    if size < 0:
        return None
    digest = hashlib.sha256(str(size).encode())
    try:
        with open_input(uri) as f:
            digest.update(f.read(FINGERPRINT_SPAN))
            if size > FINGERPRINT_SPAN:
                f.seek(max(FINGERPRINT_SPAN, size - FINGERPRINT_SPAN))
                digest.update(f.read(FINGERPRINT_SPAN))
    except OSError:
        return None
    return digest.hexdigest()
