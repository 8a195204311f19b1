"""Table upkeep, as Delta users expect it: compaction of small files and vacuum of files no version
still needs, by the lake's engine: deltalake (no Spark), or delta-spark's OPTIMIZE and VACUUM
(amqpcap.job.spark_upkeep). Run it now and then (`amqpcap maintain`); a run over many small captures
leaves many small files. It also clears what interrupted runs left behind: pending runs are
repaired first, old staging folders removed."""

from __future__ import annotations

import time

from amqpcap.lake import runlog
from amqpcap.lake.paths import absolute, table_uri
from amqpcap.settings import Settings
from amqpcap.tables.registry import TABLES


class DeltaRsUpkeep:
    name = "delta-rs"
    appliers: dict = {}  # delta-rs's own table commit is the run log's default

    def compact(self, uri: str, target: int) -> tuple[int, int]:
        from deltalake import DeltaTable
        metrics = DeltaTable(uri).optimize.compact(target_size=target)
        return metrics.get("numFilesRemoved", 0), metrics.get("numFilesAdded", 0)

    def vacuum(self, uri: str, hours: int, dry_run: bool) -> int:
        from deltalake import DeltaTable
        return len(DeltaTable(uri).vacuum(retention_hours=hours, dry_run=dry_run, enforce_retention_duration=False))


def maintain(lake: str, settings: Settings, dry_run: bool = False, upkeep=None) -> list[dict]:
    """One line of facts per table: files compacted, files vacuumed. `upkeep`: the engine's
    (default delta-rs's, `DeltaRsUpkeep`)."""
    from deltalake import DeltaTable
    upkeep = upkeep or DeltaRsUpkeep()
    report = []
    if not dry_run:
        for run_id, outcome in runlog.repair(lake, upkeep.appliers):
            report.append({"table": "(run log)", "action": f"run {run_id} {outcome}"})
    target = settings.maintain.target_file_mb << 20
    hours = settings.maintain.retention_hours
    for name in TABLES:
        uri = table_uri(lake, name)
        if not DeltaTable.is_deltatable(uri):
            continue
        facts = {"table": name, "files": len(DeltaTable(uri).file_uris())}
        if not dry_run:
            removed, added = upkeep.compact(uri, target)
            facts["compacted"] = f"{removed} -> {added} files"
        facts["vacuumed"] = upkeep.vacuum(uri, hours, dry_run)
        report.append(facts)
    report += _old_staging(lake, hours, dry_run)
    return report


def _old_staging(lake: str, hours: int, dry_run: bool) -> list[dict]:
    import pyarrow.fs as pafs

    from amqpcap.lake.tablefiles import filesystem_of
    filesystem, root = filesystem_of(absolute(lake))
    entries = filesystem.get_file_info(pafs.FileSelector(f"{root}/_staging", allow_not_found=True))
    cutoff = time.time() - hours * 3600
    removed = []
    for entry in entries:
        if entry.type == pafs.FileType.Directory and entry.mtime is not None and entry.mtime.timestamp() < cutoff:
            if not dry_run:
                filesystem.delete_dir(entry.path)
            removed.append({"table": "(staging)", "action": f"removed {entry.base_name}"})
    return removed
