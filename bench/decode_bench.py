"""Capture decode benchmark: `amqpcap decode` against tshark on the same large capture.

    .venv/bin/python bench/decode_bench.py [--mb 150] [--small-mb 50] [--keep DIR] [--interpreted] [--tls]
                                           [--shapes mixed,small]

Builds (or reuses, with --keep) captures of --small-mb and --mb megabytes of the mixed night and
one of --mb megabytes of the small-frame night (bench/synth.py --shape small: mostly frames under
1 kB, on which tshark runs at 10-15 MB/s), then on each, in the same run and one after the other on
an otherwise idle machine:

    amqpcap decode --jsonl --quiet FILE > /dev/null      (JSON Lines)
    amqpcap decode --quiet FILE > /dev/null              (the readable view)
    tshark -r FILE -Y amqp -T fields -e amqp.method.method > /dev/null

and reports the fastest of --repeat runs (alternating), MB/s, packets/s, frames/s and peak memory
(RSS) of each. All are single-threaded: per second is per core. --interpreted adds the JSON Lines view on the interpreted modules
(AMQPCAP_INTERPRETED=1), the reference build, whose speed must not fall behind.
Targets (issue 12, raised from issue 3's 2x): on the large file of the mixed night, JSON Lines at
least 3x tshark's throughput and the readable view at least 2x; on the small-frame night (issue 55)
5x and 4x; a peak memory that does not grow with capture size (compare the two sizes).

--tls also decodes each file's TLS twin (bench/tls_twin.py: every connection carried by TLS 1.3,
with its key log) with `--tls-keylog`, each run right after the same view's run in clear, and
reports its speed against the view in clear (issue 53's target: JSON Lines on TLS at least 0.7x of
its speed in clear, the peak memory as flat) twice: fastest against fastest, and the median of the
rounds' pairs (the two runs of a round share the VM's spell of speed, which the fastest runs of
each need not). And the twin's JSON Lines without the key log, to split TLS's time into what
accounting costs (records framed, handshakes parsed) and what keys, decryption and decoding add.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402
import tls_twin  # noqa: E402
from spawn import measured  # noqa: E402

# What is measured: (name, amqpcap's arguments before the file, extra environment, target ratio
# against tshark per night: the mixed night's of issue 12, the small-frame night's of issue 55)
VIEWS = (("decode --jsonl", ["decode", "--jsonl", "--quiet"], {}, {"mixed": 3.0, "small": 5.0}),
         ("readable view", ["decode", "--quiet"], {}, {"mixed": 2.0, "small": 4.0}))
INTERPRETED = ("--jsonl interpreted", ["decode", "--jsonl", "--quiet"], {"AMQPCAP_INTERPRETED": "1"}, {})
TLS_TARGET = 0.7  # TLS at least this share of the same view's speed in clear
# The TLS twin without its key log: every connection accounted (handshakes, records, bytes), none
# decrypted; what TLS costs before any key is used (the split --tls prints)
NO_KEYS = (f"{VIEWS[0][0]} TLS, no keys", VIEWS[0][1], {}, {})


def run(command: list[str], env: dict | None = None) -> tuple[float, int]:
    """(wall seconds, peak RSS in MB) of one command, measured by a small launcher (bench/spawn.py:
    a child forked from this process would count this process's memory, the captures it read)."""
    seconds, rss, _, code = measured(command, env)
    if code != 0:
        raise subprocess.CalledProcessError(code, command)
    return seconds, rss


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=150.0)
    parser.add_argument("--small-mb", type=float, default=50.0)
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the synthetic captures in")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each tool, alternating; the fastest counts (a shared VM is noisy)")
    parser.add_argument("--interpreted", action="store_true",
                        help="also the JSON Lines view on the interpreted modules (the reference build)")
    parser.add_argument("--shapes", default=",".join(synth.SHAPES),
                        help="the nights (synth.py --shape): mixed (--small-mb and --mb), small (--mb)")
    parser.add_argument("--tls", action="store_true",
                        help="also each view on the file's TLS twin (bench/tls_twin.py), against it in clear")
    args = parser.parse_args(argv)
    tshark = shutil.which("tshark")
    amqpcap = str(Path(sys.executable).with_name("amqpcap"))
    if tshark is None:
        print("tshark is not installed (apt-get install tshark)", file=sys.stderr)
        return 2
    folder = args.keep or Path(tempfile.mkdtemp(prefix="amqpcap-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{subprocess.run([tshark, '--version'], capture_output=True, text=True).stdout.splitlines()[0]}")
    results = {}
    shapes = [x.strip() for x in args.shapes.split(",") if x.strip()]
    nights = [("mixed", size) for size in (args.small_mb, args.mb) if "mixed" in shapes] \
        + [("small", args.mb)] * ("small" in shapes)
    for shape, size in nights:
        path = folder / (f"synth-{size:g}MB.pcap" if shape == "mixed" else f"synth-{shape}-{size:g}MB.pcap")
        if not path.exists():  # one file (synth.py --files 1)
            synth.synthesise(path, size, shape=shape)
        megabytes = path.stat().st_size / 1e6
        packets, frames = counts(path)
        views = VIEWS + ((INTERPRETED,) if args.interpreted else ())
        # (name, command, environment), each view in clear followed by the same view on the TLS twin,
        # so that a round's pair ran seconds apart, in the same spell of a shared VM's speed
        commands = []
        if args.tls:
            twin, keys = path.with_suffix(".tls.pcap"), path.with_suffix(".tls.keys")
            if not twin.exists():
                tls_twin.twin(path, twin, keys)
        for view in views:
            commands.append((view[0], [amqpcap, *view[1], str(path)], view[2]))
            if args.tls:
                commands.append((f"{view[0]} TLS", [amqpcap, *view[1], "--tls-keylog", str(keys), str(twin)], view[2]))
        if args.tls:
            commands.append((NO_KEYS[0], [amqpcap, *NO_KEYS[1], str(twin)], NO_KEYS[2]))
        tshark_command = [tshark, "-r", str(path), "-Y", "amqp", "-T", "fields", "-e", "amqp.method.method"]
        commands.append(("tshark", tshark_command, None))
        runs = [{name: run(command, env) for name, command, env in commands} for _ in range(max(1, args.repeat))]
        best = {name: (min(r[name][0] for r in runs), max(r[name][1] for r in runs)) for name, _, _ in commands}
        theirs = best["tshark"]
        results[(shape, size)] = best[views[0][0]]
        print(f"\n{path.name} (the {shape} night): {megabytes:.1f} MB, {packets} packets, {frames} frames "
              f"(fastest of {len(runs)} runs each)")
        for name, (seconds, rss) in best.items():
            print(f"  {name:28} {seconds:6.2f} s  {megabytes / seconds:6.1f} MB/s  "
                  f"{packets / seconds:9,.0f} packets/s  {frames / seconds:9,.0f} frames/s  peak RSS {rss} MB")
        for view in views:
            target = f"  (target >= {view[3][shape]:g}x)" if shape in view[3] else ""
            print(f"  ratio {view[0]:22} tshark time / its time: {theirs[0] / best[view[0]][0]:.2f}x{target}")
        if args.tls:  # the same packets, each payload 22 bytes longer: compared by time
            for view in views:
                name, tls_name = view[0], f"{view[0]} TLS"
                clear, tls = best[name][0], best[tls_name][0]
                # and round by round: the pair of one round (seconds apart) shares the machine's spell
                pairs = sorted(r[name][0] / r[tls_name][0] for r in runs)
                print(f"  ratio {name:22} TLS speed / speed in clear: {clear / tls:.2f}x fastest against fastest, "
                      f"{statistics.median(pairs):.2f}x the median round ({pairs[0]:.2f}-{pairs[-1]:.2f}) "
                      f"(target >= {TLS_TARGET:g}x), peak RSS {best[tls_name][1]} MB vs {best[name][1]} MB")
            # where TLS's time goes: without keys the twin is read, its records framed and its
            # handshakes parsed, nothing derived, opened or decoded as AMQP
            clear, tls, unkeyed = best[VIEWS[0][0]][0], best[f"{VIEWS[0][0]} TLS"][0], best[NO_KEYS[0]][0]
            print(f"  split {VIEWS[0][0]:22} without keys {unkeyed:.2f} s; with keys {tls:.2f} s = that + "
                  f"{tls - unkeyed:.2f} s (keys, records opened, AMQP decoded), against {clear:.2f} s in clear")
    if ("mixed", args.small_mb) in results and ("mixed", args.mb) in results:
        small, large = results[("mixed", args.small_mb)][1], results[("mixed", args.mb)][1]
        print(f"\namqpcap decode --jsonl peak RSS: {small} MB at {args.small_mb:g} MB, {large} MB at {args.mb:g} MB")
    if not args.keep:
        shutil.rmtree(folder)
    return 0


def counts(path: Path) -> tuple[int, int]:
    """(packets, AMQP frames) of a capture, from the decoder's statistics (in a child: a capture read
    here would count in the measured commands' peak memory, bench/spawn.py)."""
    done = subprocess.run([str(Path(sys.executable).with_name("amqpcap")), "decode", "--jsonl", str(path)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    summary = done.stderr.strip().splitlines()[-1]  # "amqpcap: 1 captures read, ...; N packets, ...; N frames; ..."
    found = re.search(r"(\d+) packets,.* (\d+) frames;", summary)
    if found is None:
        raise RuntimeError(f"no packet and frame counts in amqpcap's summary: {summary}")
    return int(found.group(1)), int(found.group(2))


if __name__ == "__main__":
    sys.exit(main())
