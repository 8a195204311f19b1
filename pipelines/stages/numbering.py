"""Between the stages, on the driver: each unit's record numbers and local TCP streams become the
numbers Wireshark shows in the whole file (frame.number, tcp.stream), so every row can be opened in
Wireshark though the file was read in byte ranges by several tasks.

A unit numbers its records from 0 and its TCP streams locally (amqp_decode.stream_index); here a
file's units are taken in byte order: a unit's first record number is one more than the records
of the units before it, and its local streams are placed in the file's stream index. Each decode
task gets the numbers of its own bucket's connections only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amqp_decode.stream_index import KEY, StreamIndex, streams_from_json
from pipelines.stages.read import bucket_of


@dataclass
class FileNumbers:
    """{unit: number of its first record less one}, and per bucket {unit: [[local stream, index], ...]}."""

    bases: dict[int, int] = field(default_factory=dict)
    streams: dict[int, dict[int, list[list[int]]]] = field(default_factory=dict)

    def for_bucket(self, bucket: int) -> dict:
        """What one decode task needs (JSON-ready)."""
        return {"bases": self.bases, "streams": self.streams.get(bucket, {})}


def number_units(plans, staged: dict, buckets: int) -> FileNumbers:
    """`plans`: the units in file order, each file's in byte order; `staged`: {unit: (_, facts)}."""
    numbers = FileNumbers()
    by_file: dict[int, list] = {}
    for unit in plans:
        by_file.setdefault(unit.file_index, []).append(unit)
    for units in by_file.values():
        index, records = StreamIndex(), 0
        for unit in sorted(units, key=lambda u: u.start):
            facts = staged[unit.unit][1]
            numbers.bases[unit.unit] = records
            records += facts.get("records", 0)
            for local, stream in enumerate(streams_from_json(facts.get("streams", []))):
                bucket = bucket_of(*stream[KEY], buckets)
                numbers.streams.setdefault(bucket, {}).setdefault(unit.unit, []).append([local, index.place(stream)])
    return numbers
