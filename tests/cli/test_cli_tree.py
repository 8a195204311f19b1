"""The command tree: one --help listing every subcommand, defaults in each subcommand's help,
--version with the build in use, documented exit codes, and an internal error that does not look
like a failed capture."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from amqpcap import cli
from tests.helpers.samples import ROOT

SUBCOMMANDS = ["decode", "run", "analyze", "repair", "maintain", "config"]


def amqpcap(*argv):
    return subprocess.run([sys.executable, "-m", "amqpcap", *argv], capture_output=True, text=True, cwd=ROOT)


def test_help_lists_every_subcommand_and_the_exit_codes():
    out = amqpcap("--help").stdout
    for name in SUBCOMMANDS:
        assert f"    {name}" in out
    assert "exit codes: 0 all good; 1 some capture failed" in " ".join(out.split())


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_help_shows_defaults_and_exit_codes(name):
    result = amqpcap(name, "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "--config FILE" in text and "--log-level" in text and "exit codes:" in text
    assert "(default: INFO)" in text


def test_a_subcommand_imports_only_its_own_module():
    """`amqpcap decode` starts without the other subcommands' modules (and what they import); an
    unknown command, and --help, still list them all."""
    code = ("import sys; from amqpcap import cli; cli.parser(['decode', 'x.pcap']); "
            "print(sorted(m for m in sys.modules if m.removeprefix('amqpcap.cli.') in cli.COMMANDS))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.split() == ["['amqpcap.cli.decode']"]
    wrong = amqpcap("nosuch")
    assert wrong.returncode == 2 and all(f"'{name}'" in wrong.stderr for name in SUBCOMMANDS)


def test_version_names_the_build_in_use():
    result = amqpcap("--version")
    assert result.returncode == 0 and result.stdout.startswith("amqpcap 0.")
    assert "interpreted" in result.stdout or "compiled" in result.stdout


def test_an_uncaught_exception_is_an_internal_error_not_a_failed_capture(monkeypatch, capsys):
    from amqpcap.cli import decode

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(decode.CaptureDecoder, "batches", broken)  # what the frames views read
    code = cli.main(["decode", str(ROOT / "data" / "samples" / "heartbeats.pcap")])
    assert code == cli.INTERNAL == 70
    assert "internal error" in capsys.readouterr().err


def test_decode_exit_codes(tmp_path):
    missing = amqpcap("decode", "--quiet", str(tmp_path / "missing.pcap"), str(ROOT / "data/samples/heartbeats.pcap"))
    assert missing.returncode == 1 and "missing.pcap" in missing.stderr  # the other file still decoded
    assert missing.stdout.count("\n") > 10
    assert amqpcap("decode", str(tmp_path)).returncode == 2  # no capture at all: usage
    assert amqpcap("decode", "--nope").returncode == 2


def test_the_decoding_core_is_spark_free_and_never_loads_the_product():
    """The decoder, the one pass and the rules load no module of the lake, the job, the command line
    or its views, and no Spark (tests/test_walls.py reads the same from the sources)."""
    product = ("amqpcap.lake", "amqpcap.job", "amqpcap.cli", "amqpcap.decodeview", "amqpcap.report")
    code = ("import sys, amqpcap.connection.decoder, amqpcap.onepass.tabulate, amqpcap.rules.stats; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark' or m.startswith({product!r})))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr[-2000:]


def test_decode_starts_without_the_heavy_libraries():
    """`amqpcap decode` pays its start-up on every run (0.16 s of the 1.16 s that decoding 150 MB took,
    before the settings left pydantic): what it imports leaves out Spark, Arrow, pandas, numpy, Scapy (pcap and pcapng are read
    without it) and pydantic (the settings are msgspec's)."""
    code = ("import sys; from amqpcap.cli import main; main(['decode', '--jsonl', '--quiet', sys.argv[1]]); "
            "print(sorted({m.split('.')[0] for m in sys.modules}), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code, str(ROOT / "data" / "samples" / "heartbeats.pcap")],
                            capture_output=True, text=True, cwd=ROOT)
    loaded = set(ast.literal_eval(result.stderr.strip().splitlines()[-1]))
    assert result.stdout.count("\n") > 10
    assert loaded & {"pyspark", "pyarrow", "pandas", "numpy", "scapy", "pydantic", "deltalake", "rich"} == set()


# A program that runs amqpcap's own entry point and, at Python's teardown, writes TEARDOWN
PROGRAM_WITH_TEARDOWN_MARK = ("import atexit, sys; atexit.register(lambda: sys.stderr.write('TEARDOWN\\n')); "
                              "sys.argv[0] = 'amqpcap'; from amqpcap.cli import program; program()")


def program_run(*argv):
    return subprocess.run([sys.executable, "-c", PROGRAM_WITH_TEARDOWN_MARK, *map(str, argv)], capture_output=True,
                          cwd=ROOT)


@pytest.mark.parametrize("view", [["--jsonl"], [], ["--stats"]])
def test_decode_ends_the_process_at_once_with_all_its_output(capfdbinary, view):
    """`amqpcap decode` ends without Python's teardown (amqpcap.cli._end_at_once), and loses
    nothing by it: its output and summary are those of the same decode run in process."""
    capture = ROOT / "data" / "samples" / "concurrent.pcap"
    assert cli.main(["decode", *view, str(capture)]) == cli.OK
    out, err = capfdbinary.readouterr()
    done = program_run("decode", *view, capture)
    assert done.returncode == cli.OK
    assert done.stdout == out and len(out) > 1000
    assert done.stderr == err and b"1 captures read" in err
    failed = program_run("decode", *view, capture, ROOT / "no-such.pcap")
    assert failed.returncode == cli.CAPTURE_FAILED and failed.stdout == out
    assert b"no-such.pcap: no such file" in failed.stderr and b"TEARDOWN" not in failed.stderr


def test_commands_that_hold_more_than_their_output_end_through_the_teardown():
    done = program_run("config")
    assert done.returncode == cli.OK and b"[decode]" in done.stdout
    assert done.stderr.endswith(b"TEARDOWN\n")


def test_decode_into_a_pipe_closed_early_ends_quietly():
    """`amqpcap decode ... | head -1`: not an error."""
    reading = subprocess.Popen([sys.executable, "-m", "amqpcap", "decode", "--jsonl",
                                str(ROOT / "data" / "samples" / "concurrent.pcap")], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reading.stdout.readline().startswith(b'{"ts":')
    reading.stdout.close()
    assert reading.stderr.read() == b"" and reading.wait(timeout=60) == cli.OK
