"""The JVM class archive: keyed by the JVM and the Spark jars, used only when whole, and never
given its final name before the JVM that wrote it has finished."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from amqpcap.job import class_archive


@pytest.fixture()
def prefix(tmp_path, monkeypatch):
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setattr(class_archive.sys, "prefix", str(tmp_path / "venv"))
    return tmp_path


def test_the_archive_is_named_for_this_jvm(prefix):
    first = class_archive.archive_path()
    assert first is not None and first.parent == prefix / "venv" / "share" / "amqpcap"
    (prefix / "jdk" / "bin" / "java").write_bytes(b"#!/bin/sh\n# another build\n")
    assert class_archive.archive_path() != first  # another JDK finds no archive


def test_only_a_whole_archive_is_mapped(prefix):
    path = class_archive.archive_path()
    assert class_archive.java_options() == ""
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x" * 1000)  # not an archive
    assert class_archive.java_options() == ""
    path.write_bytes(b"x" * class_archive.MIN_BYTES)
    assert class_archive.java_options() == f"-XX:SharedArchiveFile={path}"


def test_a_failed_dump_leaves_no_archive(prefix, monkeypatch):
    def run(argv, **_):
        Path(argv[-1]).write_bytes(b"half")  # a JVM that died while writing
        return subprocess.CompletedProcess(argv, 1, "", "java.lang.OutOfMemoryError")
    monkeypatch.setattr(class_archive.subprocess, "run", run)
    assert class_archive.build() is None
    assert not list((prefix / "venv" / "share" / "amqpcap").iterdir())


def test_a_finished_dump_replaces_older_archives(prefix, monkeypatch):
    folder = prefix / "venv" / "share" / "amqpcap"
    folder.mkdir(parents=True)
    (folder / "spark-classes-0000000000000000.jsa").write_bytes(b"old")

    def run(argv, **_):
        Path(argv[-1]).write_bytes(b"x" * class_archive.MIN_BYTES)
        return subprocess.CompletedProcess(argv, 0, "", "")
    monkeypatch.setattr(class_archive.subprocess, "run", run)
    made = class_archive.build()
    assert made == class_archive.archive_path() and [p.name for p in folder.iterdir()] == [made.name]
