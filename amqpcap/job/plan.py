"""The units of work, decided on the driver. The read stage's: each input file whole, or, when it is
big and can be read from any offset (uncompressed, on a seekable filesystem), in byte ranges of
about `split_bytes`, so several tasks read one file (from names and sizes alone). The decode
stage's: a task per connection bucket, with the units that staged its segments (from what
reading found)."""

from __future__ import annotations

from collections import Counter

from amqpcap.capture.inputs import InputFile
from amqpcap.job.work import BucketFile, BucketWork, ReadResult, ReadUnit


def plan_units(files: list[InputFile], split_bytes: int) -> list[ReadUnit]:
    from amqpcap.capture.readers import split_points
    units: list[ReadUnit] = []
    for file_index, f in enumerate(files):
        if f.size > split_bytes and rangeable(f.uri):
            edges = split_points(f.size, split_bytes)
            for start, end in zip(edges, edges[1:]):
                units.append(ReadUnit(len(units), file_index, f.uri, start, end if end < f.size else None, f.size))
        else:
            units.append(ReadUnit(len(units), file_index, f.uri, 0, None, f.size))
    return units


def plan_buckets(units: list[ReadUnit], read: dict[int, ReadResult]) -> list[BucketWork]:
    """Every bucket some unit staged segments of, with each file's units there (in byte order)
    and the time they span; the biggest buckets first: tasks start in this order, so the small
    ones fill in at the end instead of a big one starting last while the other cores idle."""
    per_bucket: dict[int, dict[int, BucketFile]] = {}  # bucket -> file index -> its units there
    weights: Counter = Counter()  # bucket -> segments staged
    for unit in units:  # (in file order, each file's in byte order)
        result = read[unit.unit]
        for bucket, segments in sorted(result.staged.items()):
            first, last = result.facts.spans[bucket]
            entry = per_bucket.setdefault(bucket, {}).setdefault(unit.file_index,
                                                                 BucketFile(unit.file_index, [], first, last))
            entry.units.append(unit.unit)
            entry.earliest, entry.latest = min(entry.earliest, first), max(entry.latest, last)
            weights[bucket] += segments
    return [BucketWork(bucket, [by_file[index] for index in sorted(by_file)])
            for bucket, by_file in sorted(per_bucket.items(), key=lambda item: (-weights[item[0]], item[0]))]


def rangeable(uri: str) -> bool:
    """A file read in byte ranges: an uncompressed capture that can seek (its first bytes say so)."""
    from amqpcap.capture.inputs import open_input
    from amqpcap.capture.readers import rangeable as capture_rangeable
    try:
        with open_input(uri) as source:
            return capture_rangeable(uri, source)
    except OSError:
        return False
