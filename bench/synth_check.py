"""Check a capture built by bench/synth.py against what its samples promise.

    .venv/bin/python bench/synth_check.py [--mb 30] [--files 4] [--seed 1] [--rate 1.0] [--keep DIR]

Builds the capture rotated into --files files and as one file (same seed), then checks:
- the rotated files, concatenated record-wise, are byte for byte the single file;
- `amqpcap decode --jsonl` over the rotated files reports exactly the issues the copied samples have
  on their own (per kind: each sample's issues times its copies; nothing introduced, e.g. no
  retransmission-conflict, framing or resync of our making), and as many complete messages;
- no body SHA-256 appears in two copies (bodies shorter than synth.TAG, 8 bytes, are only counted: a
  2-byte body has 62^2 values), and how many connections span several files;
- the gzip -1 compression ratio of the output (real traffic with JSON or base64 bodies: 1.3-3x).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402

EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def gzip_ratio(paths: list[Path]) -> float:
    raw = packed = 0
    for path in paths:
        out = subprocess.run(f"gzip -1 -c '{path}' | wc -c", shell=True, capture_output=True, text=True, check=True)
        raw, packed = raw + path.stat().st_size, packed + int(out.stdout)
    return raw / packed


def check(folder: Path, megabytes: float, files: int, seed: int, rate: float) -> bool:
    templates = [synth.load_template(p) for p in synth.sample_paths()]
    rotated = synth.synthesise(folder / "rotated", megabytes, files, seed, rate, templates=templates)
    synth.synthesise(folder / "single.pcap", megabytes, 1, seed, rate, templates=templates)
    synth.join(rotated.paths, folder / "joined.pcap")
    ok = True

    def verdict(good: bool, text: str) -> None:
        nonlocal ok
        ok &= good
        print(f"  [{'ok' if good else 'FAIL'}] {text}")

    print(f"{len(rotated.paths)} files, {rotated.bytes / 1e6:.1f} MB, {rotated.packets} packets, {rotated.copies} "
          f"copies, {rotated.connections} connections, {rotated.span_s:.0f} s of capture, "
          f"{rotated.mean_concurrent:.0f} open on average (max {rotated.max_concurrent})")
    verdict(filecmp.cmp(folder / "joined.pcap", folder / "single.pcap", shallow=False),
            "rotated files joined record-wise == the single file")
    copies = Counter(rotated.plan.template.tolist())
    expected_issues, expected_contents = Counter(), Counter()
    for t, n in copies.items():
        for kind, count in templates[t].issues.items():
            expected_issues[kind] += count * n
        for complete, count in templates[t].contents.items():
            expected_contents[complete] += count * n
    issues, contents, kinds = Counter(), Counter(), Counter()
    by_sha: dict[str, set[int]] = defaultdict(set)
    short: set[str] = set()  # bodies shorter than the tag: few values (62^n), a collision is possible
    captures: dict[str, set[str]] = defaultdict(set)
    decode = subprocess.Popen([str(Path(sys.executable).with_name("amqpcap")), "decode", "--jsonl", "--quiet",
                               *map(str, rotated.paths)], stdout=subprocess.PIPE)
    for line in decode.stdout:
        record = json.loads(line)
        kinds[record["kind"]] += 1
        captures[record["connection"]].add(record["capture"])
        if record["kind"] == "issue":
            issues[record["issue_kind"]] += 1
        message = record.get("message")
        if message:
            contents[message["complete"]] += 1
            if message["body_sha256"] and message["body_sha256"] != EMPTY_SHA256:
                by_sha[message["body_sha256"]].add(synth.copy_of(rotated.plan, record["client"]))
                if message["body_size"] < synth.TAG:
                    short.add(message["body_sha256"])
    decode.wait()
    print(f"  records: {dict(kinds)}")
    verdict(issues == expected_issues, f"issues {dict(issues)} == the samples' own x copies {dict(expected_issues)}")
    verdict(contents == expected_contents, f"content methods by complete {dict(contents)} == {dict(expected_contents)}")
    shared = sum(1 for sha, in_copies in by_sha.items() if len(in_copies) > 1 and sha not in short)
    shared_short = sum(1 for sha in short if len(by_sha[sha]) > 1)
    verdict(shared == 0, f"{len(by_sha)} distinct non-empty bodies; of those of {synth.TAG} bytes or more, {shared} "
                         f"in more than one copy (shorter ones: {shared_short} of {len(short)})")
    verdict(len(captures) == rotated.connections,
            f"{len(captures)} connections decoded, {rotated.connections} made")
    spans = Counter(len(c) for c in captures.values())
    verdict(files == 1 or any(n > 1 for n in spans),
            f"connections by files spanned: {dict(sorted(spans.items()))}")
    plain = [p for p in synth.sample_paths() if p.suffix == ".pcap"]
    print(f"  gzip -1 ratio: {gzip_ratio(rotated.paths):.2f}x (the uncompressed samples themselves: "
          f"{gzip_ratio(plain):.2f}x)")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=30.0)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--keep", type=Path, help="folder to write (and keep) the captures in")
    args = parser.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="amqpcap-synthcheck-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return 0 if check(folder, args.mb, args.files, args.seed, args.rate) else 1
    finally:
        if not args.keep:
            shutil.rmtree(folder)


if __name__ == "__main__":
    sys.exit(main())
