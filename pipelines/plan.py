"""The read stage's units of work: each input file whole, or, when it is big and can be read from
any offset (uncompressed, on a seekable filesystem), in byte ranges of about `split_bytes`, so
several tasks read one file. Decided on the driver from names and sizes alone."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.inputs import InputFile


@dataclass(frozen=True)
class Unit:
    unit: int
    file_index: int
    uri: str
    start: int
    end: int | None  # None: to the end of the file
    size: int


def plan_units(files: list[InputFile], split_bytes: int) -> list[Unit]:
    from amqp_decode.capture import split_points
    units: list[Unit] = []
    for file_index, f in enumerate(files):
        if f.size > split_bytes and rangeable(f.uri):
            edges = split_points(f.size, split_bytes)
            for start, end in zip(edges, edges[1:]):
                units.append(Unit(len(units), file_index, f.uri, start, end if end < f.size else None, f.size))
        else:
            units.append(Unit(len(units), file_index, f.uri, 0, None, f.size))
    return units


def rangeable(uri: str) -> bool:
    """A file read in byte ranges: an uncompressed capture that can seek (its first bytes say so)."""
    from amqp_decode.capture import rangeable as capture_rangeable
    from pipelines.inputs import open_input
    try:
        with open_input(uri) as source:
            return capture_rangeable(uri, source)
    except OSError:
        return False
