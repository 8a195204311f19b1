"""A run is all or nothing, for every reader: the lake's run log on top of Delta.

Delta has no multi-table transaction: a run commits each table on its own. So a run commits in
four steps, each durable before the next:

1. its manifest, `_amqpcap/pending/<run id>.json`: for every table, the files to add (already
   written), the captures whose rows they replace, and the provisional rows of earlier runs its
   resumed connections supersede (`superseded`: (connection, source) pairs, docs/state.md);
2. one Delta commit per table, tagged with the run id (`amqpcap_run_id` in the commit info);
3. its row in the `runs` table: from then on the run is complete;
4. the manifest is deleted.

The table commits are the engine's (`apply`): delta-rs adds the files the executors wrote into the
table folders (`apply_table`, here); delta-spark writes the rows of files staged elsewhere
(`manifest["root"]`) through Spark (amqpcap.job.spark_sink). Either tags its commits with the run id
(delta-rs: commit info `amqpcap_run_id`; Spark: its `userMetadata`, `amqpcap_run_id=<id>`), so
everything below reads either engine's commits.

Readers (`snapshot`, used by amqpcap.lake.spark_read and the amqpcap.lake helpers) read every table at its
latest version unless some run is pending (a manifest without a runs row): then each table is read
at the version just before that run's first commit to it, so a half-committed run is never seen.
The next run, or `amqpcap repair`, rolls every pending run forward by applying its manifest again
(step 2 skips a table whose commit the run already made, found by its tag) or, when files of the
manifest are gone, back, by compensating commits that remove its added files and add back what it
removed (never a restore, which would also undo other runs' commits since).

Concurrent runs: each table commit declares a Delta application transaction per capture it
replaces (`amqpcap:<hash of the capture>`). Two runs replacing the same capture at once cannot both
commit on the same table version: the later one fails and is retried against the table as it now
is (its removes recomputed; delta-rs's own retry, which would rebase it unchanged, is off), so
exactly one copy of a capture's rows remains, whichever finished last. Runs over different captures
do not conflict. No lock file exists that a killed run could leave behind.

Fault injection (tests): AMQPCAP_FAULT=commit:N kills the process with SIGKILL at step N of the
sequence: 1 after the manifest, 2.. after each table commit, then after the runs row, after the
manifest's deletion.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import random
import signal
import time
import uuid

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from amqpcap.lake.paths import absolute, pending_dir, table_uri
from amqpcap.lake.tablefiles import TableFile, filesystem_of, rows_to_batch, stats
from amqpcap.tables.registry import RUNS, TABLES, Table

RUN_TAG = "amqpcap_run_id"
ENGINE = "delta-rs"  # the engine of a manifest that names none (0.2.0's)
ATTEMPTS = 20  # commits retried after a concurrent run's commit won


# -- writing ---------------------------------------------------------------------------------------

def commit_run(lake: str, manifest: dict, apply=None) -> dict[str, int]:
    """Steps 1-4 for a run described by `manifest` (see `manifest_of`); the versions committed.
    Applying the same manifest again finishes what is left of it (a repair). `apply`: the engine's
    table commit, with `apply_table`'s arguments (default: delta-rs's, `apply_table`)."""
    apply = apply or apply_table
    staged = {"root": manifest["root"]} if manifest.get("root") else {}  # files outside the tables' folders
    filesystem, pending = filesystem_of(pending_dir(lake))
    path = f"{pending}/{manifest['run_id']}.json"
    filesystem.create_dir(pending, recursive=True)
    if not _exists(filesystem, path):
        _write(filesystem, path, json.dumps(manifest).encode())
    step = 1
    _fault(step)
    versions: dict[str, int] = {}

    def one(name: str) -> None:
        versions[name] = apply(lake, TABLES[name], [TableFile.of(f) for f in manifest["files"].get(name, [])],
                               None if manifest["replaced"] is None else set(manifest["replaced"]),
                               manifest["run_id"], manifest["created_ms"],
                               [tuple(p) for p in manifest.get("superseded", [])], **staged)

    # An engine whose commits wait on something else (Spark's jobs) makes several at once: any
    # subset of a run's commits may land before a kill, and the run log is made for that.
    width = getattr(apply, "concurrent_tables", 1)
    if width > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(width, thread_name_prefix="commit") as pool:
            for _ in pool.map(one, manifest["tables"]):
                step += 1
                _fault(step)
    else:
        for name in manifest["tables"]:
            one(name)
            step += 1
            _fault(step)
    _append_run(lake, manifest, versions)
    _fault(step + 1)
    filesystem.delete_file(path)
    _fault(step + 2)
    return versions


def manifest_of(run_id: str, kind: str, files: list[TableFile], replaced: set[str] | None, tables: tuple[Table, ...],
                captures: list[str] = (), summary: dict | None = None, started: float | None = None,
                superseded: list[tuple[str, str]] = (), engine: str = ENGINE, root: str | None = None) -> dict:
    """`root`: where the files are (`<root>/<table>/<file's path>`) when not in the tables' own
    folders (delta-spark's staging area)."""
    return {"run_id": run_id, "kind": kind, "engine": engine, "root": root, "created_ms": int(time.time() * 1000),
            "started": started or time.time(), "tables": [t.name for t in tables],
            "files": {t.name: [msgspec.structs.asdict(f) for f in files if f.table == t.name] for t in tables},
            "replaced": None if replaced is None else sorted(replaced), "captures": sorted(captures),
            "superseded": sorted(map(list, superseded)), "summary": summary}


def apply_table(lake: str, table: Table, files: list[TableFile], replaced: set[str] | None, run_id: str,
                since_ms: int, superseded: list[tuple[str, str]] = ()) -> int:
    """One table's commit for a run: its files in, the replaced captures' rows out, and the
    superseded provisional rows. Done once: a commit this run already made (found by its tag) is
    not repeated."""
    from deltalake import CommitProperties, DeltaTable, Schema, Transaction
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import AddAction, create_table_with_add_actions

    uri = table_uri(lake, table)
    schema = pa.schema([pa.field("date", pa.date32()), *table.arrow(without=("date",)).remove_metadata()])
    superseded = superseded if "provisional" in table.names else ()
    claimed = sorted(set(replaced) | {source for _, source in superseded}) if replaced is not None else None
    claims = [Transaction(capture_claim(c), int(since_ms), int(since_ms)) for c in claimed] \
        if claimed is not None else [Transaction(f"amqpcap:rebuild:{table.name}", int(since_ms), int(since_ms))]
    # No retry inside delta-rs: it would rebase the commit onto a concurrent run's (a creation onto
    # a creation, an append that removes nothing onto another), which leaves both runs' rows of a
    # capture. Here a commit that lost the race is computed again from the table as it now is.
    properties = CommitProperties(custom_metadata={RUN_TAG: run_id}, app_transactions=claims, max_commit_retries=0)
    for attempt in range(ATTEMPTS):
        done = committed_version(uri, run_id, since_ms)
        if done is not None:
            return done
        seen = _version(uri)
        now = int(time.time() * 1000)
        adds = [AddAction(f.path, f.size, {"date": f.date}, now, True, f.stats) for f in files]
        try:
            if not DeltaTable.is_deltatable(uri):
                create_table_with_add_actions(uri, Schema.from_arrow(schema), adds, mode="append",
                                              partition_by=["date"], commit_properties=properties)
            else:
                existing = DeltaTable(uri)
                removes, rewritten = _replaced_files(uri, table, existing, replaced, superseded, now)
                existing.create_write_transaction(removes + rewritten + adds, mode="append", schema=schema,
                                                  partition_by=["date"], commit_properties=properties)
            done = committed_version(uri, run_id, since_ms)
            if done is not None:
                return done
        except (CommitFailedError, OSError, Exception) as error:  # a concurrent commit won: retry on its result
            if attempt == ATTEMPTS - 1 or not (_retryable(error) or _version(uri) != seen):
                raise
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
    raise RuntimeError(f"{table.name}: could not commit run {run_id}")


def _version(uri: str) -> int | None:
    """The table's latest version (None: no table yet). A commit that failed while this moved lost
    a race with another run (e.g. both found no table and both tried to create it) and is retried,
    whatever delta-rs's message says."""
    from deltalake import DeltaTable
    try:
        return DeltaTable(uri).version() if DeltaTable.is_deltatable(uri) else None
    except Exception:
        return None


def capture_claim(capture: str) -> str:
    return "amqpcap:" + hashlib.sha256(capture.encode()).hexdigest()[:32]


def _retryable(error: Exception) -> bool:
    text = str(error)
    return any(s in text for s in ("Concurrent", "concurrent", "already exists", "Version mismatch",
                                   "version", "Protocol changed", "conflict"))


def committed_version(uri: str, run_id: str, since_ms: int) -> int | None:
    """The version of `uri` that run `run_id` committed, if it did (looked for among the commits
    made since `since_ms`, newest first)."""
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(uri):
        return None
    table = DeltaTable(uri)
    for info in table.history(limit=64):
        if run_of(info) == run_id:
            return info["version"]
        if info.get("timestamp", 0) < since_ms - 60_000:  # older than the run: it did not commit here
            return None
    return None


def run_of(info: dict) -> str | None:
    """The run that made a commit (its history entry), whichever engine committed it."""
    tagged = info.get(RUN_TAG)
    if tagged is None and str(info.get("userMetadata") or "").startswith(RUN_TAG + "="):
        tagged = info["userMetadata"][len(RUN_TAG) + 1:]
    return tagged


def run_tag(run_id: str) -> str:
    """A Spark commit's `userMetadata` naming its run (`run_of` reads it back)."""
    return f"{RUN_TAG}={run_id}"


def _replaced_files(uri: str, table: Table, existing, replaced: set[str] | None,
                    superseded: list[tuple[str, str]], now: int):
    """(removes, adds) making the replaced captures' rows and the superseded provisional rows
    disappear: whole files out, and files that keep other rows rewritten without them."""
    from deltalake.transaction import RemoveAction
    removes, adds = [], []
    touching = (replaced or set()) | {source for _, source in superseded}
    for action in pa.table(existing.get_add_actions(flatten=True)).to_pylist():
        day = str(action.get("partition.date"))
        remove = RemoveAction(action["path"], True, now, action["size_bytes"], {"date": day})
        if replaced is None:
            removes.append(remove)
            continue
        held = _captures_of(uri, table, action)
        if not held & touching:
            continue
        if held <= replaced:
            removes.append(remove)
            continue
        data = pq.read_table(f"{uri}/{action['path']}")
        kept = data.filter(pc.invert(_dropped(table, data, replaced, superseded)))
        if kept.num_rows == data.num_rows:
            continue
        removes.append(remove)
        if kept.num_rows:  # other rows share the file: keep them in a new one
            adds.append(_rewrite(uri, kept, day, now))
    return removes, adds


def _dropped(table: Table, data: pa.Table, replaced: set[str], superseded: list[tuple[str, str]]) -> pa.Array:
    """The rows of a file a commit removes: those of replaced captures, and provisional rows of a
    superseded (connection, source)."""
    dropped = pc.fill_null(pc.is_in(data.column(table.replace_key), pa.array(sorted(replaced), pa.string())), False)
    return pc.or_(dropped, superseded_rows(data, superseded)) if superseded else dropped


def superseded_rows(data: pa.Table, pairs: list[tuple[str, str]]) -> pa.Array:
    """Which rows of `data` are provisional rows of a superseded (connection, source)."""
    # (arrays typed: pyarrow's first type inference in a process imports 0.18 s of modules)
    if not pairs or "provisional" not in data.column_names:
        return pa.array([False] * data.num_rows, pa.bool_())
    keys = pa.array([f"{c}\x00{s}" for c, s in pairs], pa.string())
    hit = pa.array([False] * data.num_rows, pa.bool_())
    for name in ("connection", "publisher_connection", "consumer_connection"):  # message_flows has two
        if name in data.column_names:
            joined = pc.binary_join_element_wise(data.column(name), data.column("source"), "\x00")
            hit = pc.or_(hit, pc.fill_null(pc.is_in(joined, keys), False))
    return pc.and_(pc.fill_null(data.column("provisional"), False), hit)


def _captures_of(uri: str, table: Table, action: dict) -> set[str]:
    key = table.replace_key
    low, high = action.get(f"min.{key}"), action.get(f"max.{key}")
    if low is not None and low == high:
        return {low}
    column = pq.read_table(f"{uri}/{action['path']}", columns=[key]).column(key)
    return {value for value in pc.unique(column).to_pylist() if value is not None}


def _rewrite(uri: str, kept: pa.Table, day: str, now: int):
    from deltalake.transaction import AddAction
    filesystem, root = filesystem_of(uri)
    relative = f"date={day}/part-kept-{uuid.uuid4().hex[:12]}.parquet"
    pq.write_table(kept, f"{root}/{relative}", compression="zstd", filesystem=filesystem)
    metadata = pq.read_metadata(f"{root}/{relative}", filesystem=filesystem)
    return AddAction(relative, filesystem.get_file_info(f"{root}/{relative}").size, {"date": day}, now, True,
                     json.dumps(stats(metadata)))


def _append_run(lake: str, manifest: dict, versions: dict[str, int]) -> None:
    """Step 3, once: the run's row in the run log."""
    from deltalake import CommitProperties, DeltaTable, Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions
    uri = table_uri(lake, RUNS)
    if manifest["run_id"] in completed_runs(lake):
        return
    finished = time.time()
    row = {"date": datetime.datetime.fromtimestamp(finished, datetime.timezone.utc).date(),
           "run_id": manifest["run_id"], "kind": manifest["kind"], "started_at": int(manifest["started"] * 1e6),
           "finished_at": int(finished * 1e6), "captures": manifest.get("captures") or [],
           "replaced": manifest["replaced"], "versions": [(k, str(v)) for k, v in versions.items()],
           "summary_json": json.dumps(manifest["summary"]) if manifest.get("summary") else None}
    filesystem, root = filesystem_of(uri)
    day = row["date"].isoformat()
    relative = f"date={day}/run-{manifest['run_id'][:8]}-{uuid.uuid4().hex[:12]}.parquet"
    filesystem.create_dir(f"{root}/date={day}", recursive=True)
    batch = rows_to_batch(RUNS, [row], without=("date",))
    pq.write_table(pa.Table.from_batches([batch]), f"{root}/{relative}", filesystem=filesystem)
    metadata = pq.read_metadata(f"{root}/{relative}", filesystem=filesystem)
    add = AddAction(relative, filesystem.get_file_info(f"{root}/{relative}").size, {"date": day},
                    int(finished * 1000), True, json.dumps(stats(metadata)))
    schema = pa.schema([pa.field("date", pa.date32()), *RUNS.arrow(without=("date",)).remove_metadata()])
    properties = CommitProperties(custom_metadata={RUN_TAG: manifest["run_id"]})
    for attempt in range(ATTEMPTS):
        try:
            if not DeltaTable.is_deltatable(uri):
                create_table_with_add_actions(uri, Schema.from_arrow(schema), [add], mode="append",
                                              partition_by=["date"], commit_properties=properties)
            else:
                DeltaTable(uri).create_write_transaction([add], mode="append", schema=schema, partition_by=["date"],
                                                         commit_properties=properties)
            return
        except Exception:
            if committed_version(uri, manifest["run_id"], manifest["created_ms"]) is not None:
                return
            if attempt == ATTEMPTS - 1:
                raise
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))


# -- reading ---------------------------------------------------------------------------------------

def completed_runs(lake: str) -> set[str]:
    from deltalake import DeltaTable
    uri = table_uri(lake, RUNS)
    if not DeltaTable.is_deltatable(uri):
        return set()
    ids: set[str] = set()
    for path in DeltaTable(uri).file_uris():
        ids.update(pq.read_table(path.removeprefix("file://"), columns=["run_id"]).column("run_id").to_pylist())
    return ids


def pending_runs(lake: str) -> list[dict]:
    """Manifests of runs that began committing and have no runs row: interrupted, or still going."""
    import pyarrow.fs as pafs
    filesystem, pending = filesystem_of(pending_dir(lake))
    entries = filesystem.get_file_info(pafs.FileSelector(pending, allow_not_found=True))
    manifests = []
    for entry in entries:
        if entry.path.endswith(".json"):
            try:
                with filesystem.open_input_stream(entry.path) as f:
                    manifests.append(json.loads(f.read()))
            except (OSError, ValueError):
                continue
    if not manifests:
        return []
    done = completed_runs(lake)
    return [m for m in manifests if m["run_id"] not in done]


def snapshot(lake: str) -> dict[str, int | None]:
    """The version of every table to read: the latest, except below the first commit of a pending
    run (None: the table does not exist yet, or only such a run has written it)."""
    from deltalake import DeltaTable
    pending = {m["run_id"]: m for m in pending_runs(lake)}
    versions: dict[str, int | None] = {}
    for name in TABLES:
        uri = table_uri(lake, name)
        if not DeltaTable.is_deltatable(uri):
            versions[name] = None
            continue
        table = DeltaTable(uri)
        latest = table.version()
        if pending:
            firsts = [info["version"] for info in table.history() if run_of(info) in pending]
            if firsts:
                latest = min(firsts) - 1
        versions[name] = latest if latest >= 0 else None
    return versions


def table_files(lake: str, table: Table | str, version: int | None = None) -> list[str]:
    """The Parquet files (URIs) of a table at a version (default: the snapshot's)."""
    from deltalake import DeltaTable
    name = table if isinstance(table, str) else table.name
    if version is None:
        version = snapshot(lake).get(name)
        if version is None:
            return []
    return DeltaTable(table_uri(lake, name), version=version).file_uris()


# -- repair ------------------------------------------------------------------------------------------

class EngineMissing(Exception):
    """A pending run can only be rolled forward by an engine this process does not have."""


def repair(lake: str, appliers: dict | None = None) -> list[tuple[str, str]]:
    """Roll every interrupted run forward (or back, when its files are gone); (run id, what was
    done). `appliers`: engine name -> its table commit, beyond delta-rs's (a run the delta-spark
    engine began is finished by delta-spark: its files are staged, not in the tables' folders)."""
    appliers = {ENGINE: apply_table, **(appliers or {})}
    done = []
    for manifest in pending_runs(lake):
        root = manifest.get("root") or absolute(lake)
        missing = [f for name, files in manifest["files"].items() for f in files
                   if not _exists(*filesystem_of(f"{root}/{name}/{f['path']}"))]
        engine = manifest.get("engine") or ENGINE
        if missing:
            roll_back(lake, manifest)
            done.append((manifest["run_id"], "rolled back"))
        elif engine not in appliers:
            raise EngineMissing(f"run {manifest['run_id']} was committing with {engine}; finish it with that engine "
                                f"(amqpcap repair with lake.engine = \"{engine}\")")
        else:
            commit_run(lake, manifest, appliers[engine])
            done.append((manifest["run_id"], "rolled forward"))
    return done


def engines_pending(lake: str) -> set[str]:
    """The engines of the runs waiting to be repaired."""
    return {m.get("engine") or ENGINE for m in pending_runs(lake)}


def roll_back(lake: str, manifest: dict) -> None:
    """Undo what an interrupted run committed with compensating commits, then forget it."""
    from deltalake import CommitProperties, DeltaTable
    from deltalake.transaction import AddAction, RemoveAction
    run_id = manifest["run_id"]
    now = int(time.time() * 1000)
    for name in manifest["tables"]:
        uri = table_uri(lake, name)
        version = committed_version(uri, run_id, manifest["created_ms"])
        if version is None:
            continue
        table = DeltaTable(uri)
        before = {a["path"]: a for a in pa.table(DeltaTable(uri, version=version - 1).get_add_actions(flatten=True))
                  .to_pylist()} if version > 0 else {}
        after = {a["path"]: a for a in pa.table(DeltaTable(uri, version=version).get_add_actions(flatten=True))
                 .to_pylist()}
        current = {a["path"] for a in pa.table(table.get_add_actions(flatten=True)).to_pylist()}
        actions = [RemoveAction(p, True, now, a["size_bytes"], {"date": str(a.get("partition.date"))})
                   for p, a in after.items() if p not in before and p in current]
        actions += [AddAction(p, a["size_bytes"], {"date": str(a.get("partition.date"))}, now, True,
                              json.dumps({"numRecords": a.get("num_records")}))
                    for p, a in before.items() if p not in after and p not in current]
        if actions:
            table.create_write_transaction(actions, mode="append", schema=table.schema(), partition_by=["date"],
                                           commit_properties=CommitProperties(
                                               custom_metadata={RUN_TAG: f"rollback-{run_id}"}))
    filesystem, pending = filesystem_of(pending_dir(lake))
    filesystem.delete_file(f"{pending}/{run_id}.json")


# -- helpers -----------------------------------------------------------------------------------------

def _exists(filesystem, path: str) -> bool:
    import pyarrow.fs as pafs
    return filesystem.get_file_info(path).type != pafs.FileType.NotFound


def _write(filesystem, path: str, data: bytes) -> None:
    with filesystem.open_output_stream(path + ".tmp") as out:
        out.write(data)
    filesystem.move(path + ".tmp", path)


def _fault(step: int) -> None:
    """Tests: die here, as kill -9 would, when AMQPCAP_FAULT=commit:<step>."""
    if os.environ.get("AMQPCAP_FAULT") == f"commit:{step}":
        os.kill(os.getpid(), signal.SIGKILL)
