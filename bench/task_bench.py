"""Where a decode task's time goes: the job's per-frame path, layer by layer, without Spark.

    .venv/bin/python bench/task_bench.py [--mb 150] [--shape small] [--keep DIR] [--repeat 3]

The job's decode stage spends nearly all of its time in one loop per task (amqpcap.job.stages.decode):
the decoder's records -> amqpcap.onepass.tabulate.Tabulator (the raw rows and every analytics state
machine) -> amqpcap.lake.tablefiles.TableFiles (rows into column buffers, then Arrow and Parquet).
This runs that loop on one synthetic night (bench/synth.py) four times, each time one layer deeper,
in one process set up as a task's worker is (amqpcap.process), and reports each pass's time,
frames/s and what each layer adds:

    decode      the decoder alone (every record made, then dropped)
    tabulate    + the Tabulator, its rows dropped
    columns     + the rows into the task's column buffers, each full batch dropped
    parquet     + Arrow batches and Parquet files, as the task writes them (to a temporary folder)

On one core, as each task runs; the fastest of --repeat alternating rounds counts (a shared VM is
noisy). Issue 55 asks for this table before and after each step of its work.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (before numpy is imported: amqpcap.process)
sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402

from amqpcap.connection.decoder import CaptureDecoder  # noqa: E402
from amqpcap.lake.tablefiles import TableFiles  # noqa: E402
from amqpcap.onepass.carry import CarryingDecoder  # noqa: E402
from amqpcap.onepass.tabulate import Tabulator  # noqa: E402
from amqpcap.process import fewer_collections, prepare_worker  # noqa: E402
from amqpcap.settings import Settings  # noqa: E402

LAYERS = ("decode", "tabulate", "columns", "parquet")


def one_pass(path: Path, layer: str, out: Path) -> tuple[float, int]:
    """(seconds, frames) of the loop down to `layer` (called as amqpcap.process.fewer_collections
    runs a task)."""
    settings = Settings()
    source = str(path)
    if layer == "parquet":
        shutil.rmtree(out, ignore_errors=True)
        writer = TableFiles(str(out), "bench", batch_rows=settings.spark.arrow_batch_rows)
        add = writer.add
    elif layer == "columns":
        writer = TableFiles(str(out), "bench", batch_rows=settings.spark.arrow_batch_rows)
        # the task's column buffers (its tables' layouts, batch size and budget), each full batch
        # taken and dropped rather than written (TableColumns calls the writer's _flush)
        writer._flush = lambda name: writer.columns.buffers[name].take()
        add = writer.add
    else:
        add = slice  # (rows dropped by a C call that keeps nothing: a Python no-op would be timed as a layer)

    # every row tagged with its source as a task tags it (the compiled method of the task's own decoder)
    carrier = CarryingDecoder(settings, [source], add, "bench")
    carrier.source = source
    emit = carrier._tagged

    decoder = CaptureDecoder(settings)
    start = time.perf_counter()
    if layer == "decode":
        for _ in decoder.decode([source], ends=True):
            pass
    else:
        tabulator = Tabulator.for_settings(emit, settings, "bench")
        record = tabulator.record
        for item in decoder.decode([source], ends=True):
            record(item)
        if layer == "parquet":
            writer.close()
    seconds = time.perf_counter() - start
    return seconds, decoder.stats.frames()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=150.0)
    parser.add_argument("--shape", choices=synth.SHAPES, default="small")
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the synthetic capture in")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the four passes; the fastest of each counts")
    args = parser.parse_args(argv)
    prepare_worker()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="amqpcap-task-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (f"synth-{args.mb:g}MB.pcap" if args.shape == "mixed" else f"synth-{args.shape}-{args.mb:g}MB.pcap")
    if not path.exists():
        synth.synthesise(path, args.mb, shape=args.shape)
    out = folder / "task-bench-tables"
    best: dict[str, float] = {}
    frames = 0
    for _ in range(max(1, args.repeat)):
        for layer in LAYERS:
            # as a decode task runs (amqpcap.job.stages.decode): the pass's objects are gone when the
            # collector runs at the end (a pass's cycles still alive then were frozen by the next
            # pass, and every pass ran slower than the one before)
            with fewer_collections():
                seconds, frames = one_pass(path, layer, out)
            best[layer] = min(best.get(layer, seconds), seconds)
    written = sum(f.stat().st_size for f in out.rglob("*.parquet")) / 1e6
    megabytes = path.stat().st_size / 1e6
    print(f"{path.name} (the {args.shape} night): {megabytes:.1f} MB, {frames:,} frames; fastest of "
          f"{max(1, args.repeat)} rounds, one core")
    previous = 0.0
    for layer in LAYERS:
        seconds = best[layer]
        print(f"  {layer:9} {seconds:6.2f} s  {megabytes / seconds:6.1f} MB/s  {frames / seconds:9,.0f} frames/s"
              f"  this layer +{seconds - previous:5.2f} s ({(seconds - previous) / best[LAYERS[-1]]:4.0%} of the task)")
        previous = seconds
    print(f"  ({written:.1f} MB of Parquet written)")
    if not args.keep:
        shutil.rmtree(folder)
    else:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
