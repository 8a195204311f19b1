"""Live progress of a job's tasks. Spark's accumulators reach the driver only when a task ends, so a
task reading a 2 GB file would jump from 0 to done; instead each task writes its own counters to a
small file in the run's staging area every half second, and the driver sums what it finds there.

Task side:  `TaskProgress(staging, "read-7")` with `.add(bytes=..., frames=...)`, `.close()`.
Driver side: `totals(staging)` -> summed counters of every task (and how many finished).
"""

from __future__ import annotations

import json
import time

from amqpcap.lake.tablefiles import filesystem_of

INTERVAL = 0.5  # seconds between two writes of a task's counters


class TaskProgress:
    def __init__(self, staging: str | None, name: str) -> None:
        self.counters: dict[str, int] = {}
        self.enabled = bool(staging)
        if self.enabled:
            self.filesystem, base = filesystem_of(staging)
            self.path = f"{base}/progress/{name}.json"
            self.filesystem.create_dir(f"{base}/progress", recursive=True)
        self.last = 0.0

    def add(self, **counts: int) -> None:
        for key, value in counts.items():
            self.counters[key] = self.counters.get(key, 0) + value
        if self.enabled:
            now = time.monotonic()
            if now - self.last >= INTERVAL:
                self.last = now
                self._write(False)

    def close(self) -> None:
        if self.enabled:
            self._write(True)

    def _write(self, done: bool) -> None:
        try:
            with self.filesystem.open_output_stream(self.path + ".tmp") as out:
                out.write(json.dumps({**self.counters, "done": done}).encode())
            self.filesystem.move(self.path + ".tmp", self.path)  # readers never see half a file
        except OSError:
            pass  # progress is best effort: never fail a task over it


def totals(staging: str) -> dict[str, int]:
    """Counters summed over every task that reported; `tasks` and `done` count the tasks."""
    import pyarrow.fs as pafs
    filesystem, base = filesystem_of(staging)
    summed: dict[str, int] = {"tasks": 0, "done": 0}
    try:
        entries = filesystem.get_file_info(pafs.FileSelector(f"{base}/progress", allow_not_found=True))
    except OSError:
        return summed
    for entry in entries:
        if not entry.path.endswith(".json"):
            continue
        try:
            with filesystem.open_input_stream(entry.path) as f:
                counters = json.loads(f.read())
        except (OSError, ValueError):
            continue
        summed["tasks"] += 1
        summed["done"] += bool(counters.pop("done", False))
        for key, value in counters.items():
            summed[key] = summed.get(key, 0) + value
    return summed
