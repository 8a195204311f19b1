"""Key logs (amqpcap.tls.keylog): the NSS format read line by line, errors that name the file and
line but never the secret, directories and globs listed as captures are, and the decode command's
--tls-keylog (a key log that does not parse: one line, exit 2)."""

from __future__ import annotations

import pytest

from amqpcap.cli import main
from amqpcap.tls import keylog
from amqpcap.tls.keylog import CLIENT_TRAFFIC, MASTER_SECRET, KeyLog, KeyLogError, parse_key_log, read_key_logs
from tests.helpers.samples import SAMPLES

RANDOM = bytes(range(32))
MASTER = bytes(range(100, 148))
TRAFFIC = bytes(range(200, 232))


def line(label: str, secret: bytes, random: bytes = RANDOM) -> str:
    return f"{label} {random.hex()} {secret.hex()}"


def test_lines_by_label_and_client_random():
    text = "\n".join(["# a comment", "", line(MASTER_SECRET, MASTER), line(CLIENT_TRAFFIC, TRAFFIC),
                      line("EXPORTER_SECRET", TRAFFIC), "   " + line(MASTER_SECRET, MASTER, bytes(32)) + "  "])
    keys = parse_key_log(text, "k")
    assert keys.secret(RANDOM, MASTER_SECRET) == MASTER and keys.secret(RANDOM, CLIENT_TRAFFIC) == TRAFFIC
    assert keys.secret(bytes(32), MASTER_SECRET) == MASTER
    assert keys.secret(RANDOM, "EXPORTER_SECRET") is None  # (read, not used)
    assert keys.covers(RANDOM) and not keys.covers(b"\x01" * 32) and len(keys) == 2


def test_a_key_log_prints_no_secret():
    keys = parse_key_log(line(MASTER_SECRET, MASTER), "k")
    assert MASTER.hex() not in repr(keys) and MASTER.hex() not in str(keys)
    assert repr(keys) == "KeyLog(1 client randoms from 1 key logs)"


@pytest.mark.parametrize("text, why", [
    ("CLIENT_RANDOM abc", "2 fields where a key log line has 3 (label, client random, secret)"),
    (line(MASTER_SECRET, MASTER).replace(MASTER.hex()[:2], "zz", 1), "the secret is not hexadecimal"),
    (line(MASTER_SECRET, MASTER, bytes(31)), "the client random has 31 bytes, not 32"),
    (line(MASTER_SECRET, MASTER[:40]), "a CLIENT_RANDOM secret of 40 bytes (expected 48)"),
    (line(CLIENT_TRAFFIC, TRAFFIC[:20]), "a CLIENT_TRAFFIC_SECRET_0 secret of 20 bytes (expected 32 or 48)"),
    ("GET / HTTP/1.1", "neither a label this decoder uses nor a client random after another (a key log line "
                       "is: label, client random, secret)"),
    ("get x y", "the first field is not a key log label (such as CLIENT_RANDOM)"),
])
def test_a_line_that_does_not_parse_names_its_file_and_line_never_its_secret(text, why):
    with pytest.raises(KeyLogError) as raised:
        parse_key_log("# ok\n" + line(MASTER_SECRET, MASTER) + "\n" + text + "\n", "night.keys")
    assert str(raised.value) == f"key log night.keys, line 3: {why}"
    assert MASTER.hex() not in str(raised.value) and TRAFFIC.hex()[:16] not in str(raised.value)


GOOD = line(CLIENT_TRAFFIC, TRAFFIC)


@pytest.mark.parametrize("text", [
    GOOD, GOOD.upper().replace("CLIENT_TRAFFIC_SECRET_0", CLIENT_TRAFFIC), GOOD.replace(" ", "\t"),
    GOOD.replace(" ", "  ", 1), " " + GOOD + " \r", GOOD + "0", GOOD[:-1], GOOD[:-1] + "g", GOOD + "00" * 16,
    line(CLIENT_TRAFFIC, TRAFFIC + TRAFFIC[:16]), line(CLIENT_TRAFFIC, TRAFFIC[:31]), line(MASTER_SECRET, TRAFFIC),
    line(MASTER_SECRET, MASTER), line(MASTER_SECRET, MASTER, bytes(33)), GOOD.replace(RANDOM.hex(), RANDOM.hex()[:-1]),
    GOOD.replace(RANDOM.hex()[:2], "0x", 1), "CLIENT_TRAFFIC_SECRET_0 " + "00" * 32, GOOD + " extra",
    line("EXPORTER_SECRET", TRAFFIC), "# " + GOOD, "",
])
def test_the_fast_reading_agrees_with_the_careful_one(text):
    """parse_key_log takes a well-formed line of ours at once and leaves every other to the careful
    reading (keylog._other_line), which says what is wrong: on any line both give the same."""
    careful = KeyLog()
    try:
        keylog._other_line(careful, text, "k", 1)
        expected = careful.secrets
    except KeyLogError as error:
        expected = str(error)
    try:
        got = parse_key_log(text, "k").secrets
    except KeyLogError as error:
        got = str(error)
    assert got == expected


def test_files_directories_and_globs(tmp_path):
    (tmp_path / "a.keys").write_text(line(MASTER_SECRET, MASTER))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "sslkeylog.txt").write_text(line(MASTER_SECRET, MASTER, bytes(32)))
    (tmp_path / ".hidden").write_text(line(MASTER_SECRET, MASTER, b"\x07" * 32))
    (tmp_path / "capture.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(40))  # (beside them: passed over)
    (tmp_path / "notes.txt").write_text("what these keys are for\n")
    keys = read_key_logs([str(tmp_path)])  # every key log but hidden ones, recursively
    assert len(keys) == 2 and keys.sources == 2
    assert len(read_key_logs([str(tmp_path / "*.keys")])) == 1
    assert len(read_key_logs([])) == 0
    with pytest.raises(KeyLogError, match="no such file or directory"):
        read_key_logs([str(tmp_path / "missing.keys")])
    with pytest.raises(KeyLogError, match=r"notes.txt, line 1: "):  # (named on its own: it must be one)
        read_key_logs([str(tmp_path / "notes.txt")])
    (tmp_path / "sub" / "broken.keys").write_text(line(MASTER_SECRET, MASTER) + "\nCLIENT_RANDOM zz\n")
    with pytest.raises(KeyLogError, match=r"broken.keys, line 2: "):  # (a key log of the folder that breaks)
        read_key_logs([str(tmp_path)])


def test_decode_tls_keylog_errors_are_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.keys"
    bad.write_text(line(MASTER_SECRET, MASTER) + "\nCLIENT_RANDOM 00\n")
    sample = SAMPLES / "tls" / "tls12_gcm.pcap"
    assert main(["decode", "--tls-keylog", str(bad), str(sample)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"key log {bad}, line 2: 2 fields where a key log line has 3" in err[0]
    assert main(["decode", "--tls-keylog", str(tmp_path / "none.keys"), str(sample)]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_decode_with_and_without_the_key_log(capsysbinary):
    sample = SAMPLES / "tls" / "tls12_gcm.pcap"
    assert main(["decode", "--jsonl", "--quiet", str(sample)]) == 0
    without = capsysbinary.readouterr().out.decode().splitlines()
    assert main(["decode", "--jsonl", "--quiet", "--tls-keylog", str(SAMPLES / "tls" / "tls12_gcm.keys"),
                 str(sample)]) == 0
    with_keys = capsysbinary.readouterr().out.decode().splitlines()
    assert not any('"kind":"method"' in text for text in without)
    assert sum('"kind":"method"' in text for text in with_keys) > 20
    assert all('"tls":true' in text for text in with_keys if '"kind":"method"' in text)
