"""The walls between the package's wings, kept by CI (issue 52): every import of every module (at
the top or inside a function, and the compiled build's cimports in .pxd files) is read from the
source, and none may close a circle between modules or cross a wall:

- the protocol (spec, codec, field tables, redaction, errors) imports nothing else of ours;
- capture (readers, packets, reassembly, stream numbering) does not import the TLS layer, the
  connection decoding, the tables, the rules or the one pass;
- the TLS layer (between capture and connection) does not import the connection decoding or
  anything above it;
- connection decoding does not import the tables, the rules or the one pass;
- the rules read rows (the tables wing), never the decoding below them;
- only the job imports pyspark; the job never imports the command line; the lake never imports
  the job; the decode views and the report never import the job;
- `amqpcap decode` imports neither pyspark nor the job (checked in a fresh interpreter).

A wing is a folder of the package (WINGS); a new folder must be given its wing and walls here."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.samples import ROOT

PACKAGES = ("amqpcap",)
# A wing is a folder of the package (a module belongs to the wing of its longest matching prefix);
# the package's own __init__ (its version, the hot modules' list) is "shared".
WINGS = {
    "protocol": ("amqpcap.protocol",),
    "capture": ("amqpcap.capture",),
    "tls": ("amqpcap.tls",),
    "connection": ("amqpcap.connection",),
    "columnar": ("amqpcap.columnar",),
    "tables": ("amqpcap.tables",),
    "rules": ("amqpcap.rules",),
    "one pass": ("amqpcap.onepass",),
    "shared": ("amqpcap.settings", "amqpcap.process", "amqpcap._cyutility"),  # (_cyutility: Cython's, setup.py)
    "lake": ("amqpcap.lake",),
    "job": ("amqpcap.job",),
    "cli": ("amqpcap.cli", "amqpcap.submit", "amqpcap.__main__"),
    "views": ("amqpcap.decodeview", "amqpcap.report"),
}
# wing -> the wings it may not import
WALLS = {
    "protocol": {"capture", "tls", "connection", "columnar", "tables", "rules", "one pass", "shared", "lake", "job",
                 "cli", "views"},
    "capture": {"tls", "connection", "tables", "rules", "one pass", "lake", "job", "cli", "views"},
    "tls": {"connection", "columnar", "tables", "rules", "one pass", "shared", "lake", "job", "cli", "views"},
    "connection": {"tables", "rules", "one pass", "lake", "job", "cli", "views"},
    "columnar": {"capture", "tls", "connection", "rules", "one pass", "lake", "job", "cli", "views"},
    "tables": {"capture", "tls", "rules", "one pass", "lake", "job", "cli", "views"},  # (rows are made of records)
    "rules": {"capture", "tls", "connection", "one pass", "lake", "job", "cli", "views"},
    "one pass": {"lake", "job", "cli", "views"},
    "shared": {"capture", "tls", "connection", "columnar", "tables", "rules", "one pass", "lake", "job", "cli",
               "views"},
    "lake": {"job", "cli", "views"},
    "job": {"cli", "views"},
    "views": {"job", "cli"},
}
SPARK_ALLOWED = {"job"}
SPARK = ("pyspark", "delta")  # delta: delta-spark's Python package, made of pyspark


def wing(module: str) -> str:
    """The wing of a module: its longest matching prefix's."""
    if module == "amqpcap":
        return "shared"
    best, found = -1, None
    for name, prefixes in WINGS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), name
    assert found is not None, f"{module} is in no wing: add its folder to WINGS"
    return found


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules (ours, or a top-level third-party name) `module` imports anywhere in it."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:  # `from package import module` imports the module
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    pxd = path.with_suffix(".pxd")
    if pxd.exists():
        names.update(re.findall(r"^\s*from\s+([\w.]+)\s+cimport", pxd.read_text(), re.M))
    return {_ours(name, known) for name in names if name}


def _ours(name: str, known: set[str]) -> str:
    """Our module a name refers to (the longest known prefix), else its top-level package."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return parts[0]


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {module: imports(module, path, known) - {module} for module, path in found.items()}


def test_no_wall_is_crossed():
    crossings = []
    for module, targets in graph().items():
        source = wing(module)
        for target in sorted(targets):
            if target in SPARK and source not in SPARK_ALLOWED:
                crossings.append(f"{module} ({source}) imports {target}")
            elif target.split(".")[0] in PACKAGES and wing(target) in WALLS.get(source, ()):
                crossings.append(f"{module} ({source}) imports {target} ({wing(target)})")
    assert crossings == []


def test_no_import_circle():
    """Between modules of ours (a package importing its own modules is not a circle)."""
    edges = {m: {t for t in targets if t.split(".")[0] in PACKAGES and not m.startswith(t + ".")
                 and not t.startswith(m + ".")} for m, targets in graph().items()}
    circles = [component for component in _strongly_connected(edges) if len(component) > 1]
    assert circles == []


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    out.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter[0]
                counter[0] += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def test_the_walls_test_sees_a_crossing_and_a_circle():
    """(It must be able to fail: a crossing and a circle, made up, are found.)"""
    assert wing("amqpcap.protocol.codec") == "protocol" and wing("amqpcap.job.nightly") == "job"
    assert wing("amqpcap.decodeview.order") == "views" and wing("amqpcap.lake.runlog") == "lake"
    assert wing("amqpcap") == "shared" and wing("amqpcap.capture.readers.pcap") == "capture"
    with pytest.raises(AssertionError):
        wing("amqpcap.newfolder.module")
    circles = _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert [c for c in circles if len(c) > 1] == [["a", "b", "c"]]


def test_decode_imports_neither_spark_nor_the_job():
    sample = ROOT / "data" / "samples" / "heartbeats.pcap"
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "amqpcap", "decode", "--jsonl", str(sample)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "amqpcap.decodeview.jsonl" in imported  # (what the test is about: the import log was read)
    assert not {m for m in imported if m == "pyspark" or m.startswith("pyspark.")}
    assert not {m for m in imported if m.split(".")[0] in SPARK}
    assert not {m for m in imported if m.split(".")[0] == "amqpcap" and wing(m) == "job"}
