"""TLS key logs: the NSS key log format (`SSLKEYLOGFILE`) that OpenSSL-based clients (Python's
`SSLContext.keylog_filename`, Node's `keylog` event), Go's `tls.Config.KeyLogWriter`, NSS and Java
agents write, and Wireshark reads.

    keys = read_key_logs(["/secrets/night.keys", "s3://keys/2026-11-30/"])
    keys.secret(client_random, "CLIENT_RANDOM")        # TLS 1.2's master secret, or None
    keys.secret(client_random, "SERVER_TRAFFIC_SECRET_0")

Each line is `<label> <client random, 64 hex digits> <secret, hex>`; `#` starts a comment. A line
of another shape is a `KeyLogError` naming the file and the line, never the line itself (it holds
a secret). Labels this decoder does not use (ECH's, exporters') are read and kept aside.

A KeyLog is a secret: it is never written anywhere, printed (its repr counts client randoms only),
saved with a carried connection (amqpcap.tls.layer says what is saved instead) or logged.
"""

from __future__ import annotations

from typing import Iterable

from amqpcap.capture.inputs import canonical_uri, list_inputs, local_path, open_input

# The labels of TLS 1.2's master secret and TLS 1.3's traffic secrets (RFC 8446, 7.1), with the
# size each secret must have (TLS 1.3's: the suite's hash, 32 or 48)
MASTER_SECRET = "CLIENT_RANDOM"
EARLY_SECRET = "CLIENT_EARLY_TRAFFIC_SECRET"
CLIENT_HANDSHAKE = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HANDSHAKE = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_TRAFFIC = "CLIENT_TRAFFIC_SECRET_0"
SERVER_TRAFFIC = "SERVER_TRAFFIC_SECRET_0"
SECRET_SIZES = {MASTER_SECRET: (48,), EARLY_SECRET: (32, 48), CLIENT_HANDSHAKE: (32, 48),
                SERVER_HANDSHAKE: (32, 48), CLIENT_TRAFFIC: (32, 48), SERVER_TRAFFIC: (32, 48)}
# Labels other tools write, read and not used: exporters, ECH, Wireshark's RSA and PMS forms
OTHER_LABELS = frozenset({"EXPORTER_SECRET", "EARLY_EXPORTER_SECRET", "ECH_SECRET", "ECH_CONFIG", "RSA",
                          "PMS_CLIENT_RANDOM"})
RANDOM_BYTES = 32


class KeyLogError(ValueError):
    """A key log that cannot be read: its file and line, and what is wrong (never the line)."""

    def __init__(self, source: str, line: int | None, why: str) -> None:
        self.source, self.line, self.why = source, line, why
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"key log {where}: {why}")


class KeyLog:
    """Secrets by client random and label."""

    __slots__ = ("secrets", "sources")

    def __init__(self) -> None:
        self.secrets: dict[bytes, dict[str, bytes]] = {}
        self.sources = 0  # key log files read into it

    def __len__(self) -> int:
        return len(self.secrets)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __repr__(self) -> str:  # never a secret
        return f"KeyLog({len(self.secrets)} client randoms from {self.sources} key logs)"

    def add(self, client_random: bytes, label: str, secret: bytes) -> None:
        self.secrets.setdefault(client_random, {})[label] = secret

    def secret(self, client_random: bytes | None, label: str) -> bytes | None:
        if client_random is None:
            return None
        found = self.secrets.get(client_random)
        return found.get(label) if found is not None else None

    def covers(self, client_random: bytes | None) -> bool:
        """Whether any line of the key log is for this connection's client random."""
        return client_random is not None and client_random in self.secrets

    def update(self, other: "KeyLog") -> None:
        for client_random, found in other.secrets.items():
            self.secrets.setdefault(client_random, {}).update(found)
        self.sources += other.sources

    def __reduce__(self):  # (to the executors, in a broadcast: the dict as it is)
        return _restored, (self.secrets, self.sources)


def _restored(secrets: dict, sources: int) -> KeyLog:
    keys = KeyLog()
    keys.secrets, keys.sources = secrets, sources
    return keys


def parse_key_log(text: str, source: str, into: KeyLog | None = None) -> KeyLog:
    """The lines of one key log (`source` names it in errors). A line of a label this decoder uses,
    with a client random and a secret of their sizes, is taken as it is (a night's key log has
    tens of thousands); any other line is checked by `_other_line`, which says what is wrong."""
    keys = into if into is not None else KeyLog()
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if len(fields) == 3:
            label, random_hex, secret_hex = fields
            sizes = SECRET_SIZES.get(label)
            if sizes is not None and len(random_hex) == 2 * RANDOM_BYTES and len(secret_hex) // 2 in sizes:
                try:
                    client_random, secret = bytes.fromhex(random_hex), bytes.fromhex(secret_hex)
                except ValueError:
                    pass  # (told by _other_line)
                else:
                    keys.add(client_random, label, secret)
                    continue
        _other_line(keys, line, source, number)
    keys.sources += 1
    return keys


def _other_line(keys: KeyLog, line: str, source: str, number: int) -> None:
    """A line the fast path of parse_key_log did not take: a blank or a comment, a label of another
    tool's, or a line in error (KeyLogError); a good line of ours is added all the same."""
    line = line.strip()
    if not line or line.startswith("#"):
        return
    fields = line.split()
    if len(fields) != 3:
        raise KeyLogError(source, number, f"{len(fields)} fields where a key log line has 3 "
                                          "(label, client random, secret)")
    label, random_hex, secret_hex = fields
    if not label.replace("_", "").isalnum() or not label.isupper():
        raise KeyLogError(source, number, "the first field is not a key log label (such as CLIENT_RANDOM)")
    if label in OTHER_LABELS or label not in SECRET_SIZES:
        if label == "RSA" or label.startswith(("RSA", "PMS")):
            return  # Wireshark's own forms, with other fields: not ours to check
        if len(random_hex) != 2 * RANDOM_BYTES or not _is_hex(random_hex):
            raise KeyLogError(source, number, "neither a label this decoder uses nor a client random after "
                                              "another (a key log line is: label, client random, secret)")
        return  # a label of another tool's (ECH, exporters...): read, not used
    client_random = _hex(random_hex, source, number, "client random")
    if len(client_random) != RANDOM_BYTES:
        raise KeyLogError(source, number, f"the client random has {len(client_random)} bytes, not {RANDOM_BYTES}")
    secret = _hex(secret_hex, source, number, "secret")
    if len(secret) not in SECRET_SIZES[label]:
        raise KeyLogError(source, number, f"a {label} secret of {len(secret)} bytes (expected "
                                          f"{' or '.join(map(str, SECRET_SIZES[label]))})")
    keys.add(client_random, label, secret)


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


def _hex(text: str, source: str, number: int, what: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise KeyLogError(source, number, f"the {what} is not hexadecimal") from None


def looks_like_a_key_log(text: str) -> bool:
    """Whether a file's first line that says anything is a key log line of a label we know (how a
    directory's key logs are told from the other files beside them: captures, notes)."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            label = line.split(None, 1)[0]
            return label in SECRET_SIZES or label in OTHER_LABELS
    return False


def read_key_logs(paths: Iterable[str]) -> KeyLog:
    """Every key log the paths name: files, directories (every key log inside, recursively: a
    file whose first line is a key log line; the others, captures or notes beside them, are
    passed over) and globs, local or URIs (listed and opened as captures are:
    amqpcap.capture.inputs). A path that names nothing, or a key log that does not parse (a file
    named on its own is one), is a KeyLogError."""
    keys = KeyLog()
    for path in paths:
        found = list_inputs([path], suffixes=None)
        if not found or all(entry.size < 0 for entry in found):
            raise KeyLogError(path, None, "no such file or directory")
        named = len(found) == 1 and found[0].uri in (path, canonical_uri(path))  # (not a folder's or a glob's)
        for entry in found:
            name = local_path(entry.uri) or entry.uri  # (a local file by its path, as users know it)
            if entry.size < 0:
                raise KeyLogError(name, None, "no such file")
            try:
                with open_input(entry.uri) as f:
                    data = f.read()
            except OSError as error:
                raise KeyLogError(name, None, f"cannot be read ({error.strerror or error})") from None
            # (latin-1 reads any bytes: what is not a key log fails on its line, with its number)
            text = data.decode("latin-1")
            if named or looks_like_a_key_log(text):
                parse_key_log(text, name, keys)
    return keys
