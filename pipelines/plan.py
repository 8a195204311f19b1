"""The read stage's units of work: each input file whole, or, when it is big and can be read from
any offset (uncompressed, on a seekable filesystem), in byte ranges of about `split_bytes`, so
several tasks read one file. Decided on the driver from names and sizes alone."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.inputs import InputFile, local_path


@dataclass(frozen=True)
class Unit:
    unit: int
    file_index: int
    uri: str
    start: int
    end: int | None  # None: to the end of the file
    size: int


def plan_units(files: list[InputFile], split_bytes: int) -> list[Unit]:
    units: list[Unit] = []
    for file_index, f in enumerate(files):
        if f.size > split_bytes and rangeable(f.uri):
            count = -(-f.size // split_bytes)
            edges = [f.size * k // count for k in range(count)] + [None]
            for start, end in zip(edges, edges[1:]):
                units.append(Unit(len(units), file_index, f.uri, start, end, f.size))
        else:
            units.append(Unit(len(units), file_index, f.uri, 0, None, f.size))
    return units


def rangeable(uri: str) -> bool:
    """A file read in byte ranges: an uncompressed capture (its first bytes say so)."""
    try:
        from amqp_decode.capture import is_rangeable
    except ImportError:  # a reader without byte ranges: whole files only
        return False
    path = local_path(uri)
    return is_rangeable(path if path is not None else uri)
