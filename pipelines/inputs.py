"""Finding capture files on any filesystem pyarrow can open, and opening them on executors.

Inputs are files, directories (searched recursively) and globs, as local paths or URIs
(`file://`, `s3://`, `hdfs://`, `gs://`...). The driver only lists them (names and sizes);
executors open and stream each file themselves.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from dataclasses import dataclass

import pyarrow.fs as pafs

from amqp_decode.decoder import CAPTURE_SUFFIXES


@dataclass(frozen=True)
class InputFile:
    uri: str  # as the user wrote it for local files, else scheme://...
    size: int


def _is_uri(item: str) -> bool:
    return "://" in item


def list_inputs(inputs: list[str]) -> list[InputFile]:
    """Every capture file the inputs name, sorted and without duplicates. A named file is taken
    whatever its suffix; directories and globs yield files with capture suffixes. A name that
    matches nothing is kept, so the job can report it as failed."""
    found: dict[str, InputFile] = {}
    for item in inputs:
        for entry in (_list_uri(item) if _is_uri(item) else _list_local(item)):
            found.setdefault(entry.uri, entry)
    return sorted(found.values(), key=lambda f: f.uri)


def _list_local(item: str) -> list[InputFile]:
    if os.path.isdir(item):
        return [InputFile(os.path.join(root, name), os.path.getsize(os.path.join(root, name)))
                for root, _, names in os.walk(item) for name in names if name.endswith(CAPTURE_SUFFIXES)]
    if any(c in item for c in "*?[") and not os.path.exists(item):
        return [InputFile(p, os.path.getsize(p)) for p in glob.glob(item, recursive=True)
                if os.path.isfile(p)]
    return [InputFile(item, os.path.getsize(item) if os.path.isfile(item) else -1)]


def _list_uri(item: str) -> list[InputFile]:
    scheme = item.split("://", 1)[0]
    pattern = any(c in item for c in "*?[")
    base = item.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0].rsplit("/", 1)[0] if pattern else item
    filesystem, root = pafs.FileSystem.from_uri(base)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.File and not pattern:
        return [InputFile(item, info.size)]
    if info.type == pafs.FileType.NotFound:
        return [InputFile(item, -1)]
    entries = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
    files = []
    for entry in entries:
        if entry.type != pafs.FileType.File:
            continue
        uri = f"{scheme}://{entry.path}" if scheme != "file" else f"file://{entry.path}"
        if pattern and not fnmatch.fnmatch(uri, item):
            continue
        if not pattern and not entry.path.endswith(CAPTURE_SUFFIXES):
            continue
        files.append(InputFile(uri, entry.size))
    return files


def open_input(uri: str):
    """A seekable binary file for a local path or a URI (executor side)."""
    if not _is_uri(uri):
        return open(uri, "rb")
    filesystem, path = pafs.FileSystem.from_uri(uri)
    return filesystem.open_input_file(path)
