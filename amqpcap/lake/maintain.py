"""Table upkeep, as Delta users expect it: compaction of small files and vacuum of files no version
still needs, through deltalake (no Spark). Run it now and then (`amqpcap maintain`); a run over
many small captures leaves many small files. It also clears what interrupted runs left behind:
pending runs are repaired first, old staging folders removed."""

from __future__ import annotations

import time

from amqpcap.lake import runlog
from amqpcap.lake.paths import absolute, table_uri
from amqpcap.settings import Settings
from amqpcap.tables.registry import TABLES


def maintain(lake: str, settings: Settings, dry_run: bool = False) -> list[dict]:
    """One line of facts per table: files compacted, files vacuumed."""
    from deltalake import DeltaTable
    report = []
    if not dry_run:
        for run_id, outcome in runlog.repair(lake):
            report.append({"table": "(run log)", "action": f"run {run_id} {outcome}"})
    target = settings.maintain.target_file_mb << 20
    hours = settings.maintain.retention_hours
    for name in TABLES:
        uri = table_uri(lake, name)
        if not DeltaTable.is_deltatable(uri):
            continue
        table = DeltaTable(uri)
        facts = {"table": name, "files": len(table.file_uris())}
        if not dry_run:
            metrics = table.optimize.compact(target_size=target)
            facts["compacted"] = f"{metrics.get('numFilesRemoved', 0)} -> {metrics.get('numFilesAdded', 0)} files"
            table = DeltaTable(uri)
        deleted = table.vacuum(retention_hours=hours, dry_run=dry_run, enforce_retention_duration=False)
        facts["vacuumed"] = len(deleted)
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
