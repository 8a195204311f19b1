"""Every setting of amqpcap, declared once: typed, with its default and what it means.

    settings = load_settings("conf/local.toml", ["decode.amqp_ports=[5672, 5673]"])
    settings.decode.amqp_ports, settings.lake.path, ...

The TOML loader, the command line (`--config FILE`, `--set section.key=value` and the named
options, which are shorthands for keys), the Spark executors (the settings travel as their JSON
dump, so no field can be forgotten on the way) and `conf/default.toml` (generated from these
declarations; a test keeps it equal) all use these classes. Values are validated when loaded,
before any work starts: an unknown section or key, a value of the wrong type, a bad choice, a
negative size or a spec file that does not exist or does not parse is one `SettingsError` line
naming the key, the value and what is allowed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import msgspec
from msgspec import Meta, Struct, field

from amqpcap.protocol.errors import SpecError
from amqpcap.protocol.spec import BUNDLED, load_spec


class SettingsError(Exception):
    """Settings that cannot be used; the message names the key and the value."""


class Section(Struct, frozen=True, forbid_unknown_fields=True):
    """A [section] of settings: its keys typed, each with its default and what it means."""


def about(text: str, **bounds) -> Meta:
    """What a key means (conf/default.toml and `amqpcap config --comments` print it), and the
    bounds its value keeps (gt, ge, ...: checked when settings are loaded)."""
    return Meta(description=text, **bounds)


Port = Annotated[int, Meta(ge=1, le=65535)]


class DecodeSection(Section):
    """How bytes become AMQP frames."""

    amqp_ports: Annotated[tuple[Port, ...], about(
        "Ports whose traffic is AMQP even when the connection's start was not captured. "
        "AMQP on any other port is still found by its protocol header.")] = (5672,)
    tls_ports: Annotated[tuple[Port, ...], about(
        "Ports whose traffic is TLS (AMQPS): decrypted with the key logs of tls_keylogs, else its handshake "
        "and records accounted, not decoded. TLS on any port of no known protocol is found by its "
        "ClientHello.")] = (5671,)
    tls_keylogs: Annotated[tuple[str, ...], about(
        "Key logs (NSS SSLKEYLOGFILE format, as OpenSSL, Go, Node and Java agents write them) to decrypt "
        "TLS with: files, directories (every file in them) or URIs. The job reads them once on the driver "
        "and hands the keys to its tasks; no key is ever written to the lake, a log or a carried state.")] = ()
    default_version: Annotated[str, about(
        "Spec for connections whose protocol header was not captured: \"0-9-1\" or "
        "\"0-9\" (or a version given in specs).")] = "0-9-1"
    specs: Annotated[dict[str, str], about(
        "Use another spec file (official AMQP XML format) for a version, "
        "e.g. { \"0-9-1\" = \"my.xml\" }.")] = field(default_factory=dict)
    field_table_dialect: Annotated[Literal["rabbitmq", "spec"], about(
        "Field-table tags: \"rabbitmq\" ('s' = int16, 'l' = int64, as RabbitMQ and Qpid "
        "send) or \"spec\" (the 0-9-1 PDF: 's' = short string, 'l' = uint64).")] = "rabbitmq"
    max_frame_bytes: Annotated[int, about(
        "A frame claiming a larger payload is treated as corrupt (framing "
        "resynchronises).", gt=0)] = 16 << 20
    resync_max_frame_bytes: Annotated[int, about(
        "Largest frame a resynchronisation candidate may claim; bounds what is "
        "buffered while searching.", gt=0)] = 1 << 20
    pending_records: Annotated[int, about(
        "Records held per connection while its client side is still unknown (then "
        "it is guessed from the ports).", gt=0)] = 10_000

    def __post_init__(self) -> None:
        for version, path in self.specs.items():
            try:
                load_spec(path)
            except SpecError as error:
                raise ValueError(f"specs.{version}: {error}") from None
        known = set(BUNDLED) | set(self.specs)
        if self.default_version not in known:
            raise ValueError(f"default_version {self.default_version!r} is none of {', '.join(sorted(known))}")


class ReassemblySection(Section):
    """TCP reassembly."""

    window_bytes: Annotated[int, about(
        "Out-of-order bytes held per connection direction before the hole is "
        "declared a gap.", gt=0)] = 4 << 20
    close_grace_seconds: Annotated[float, about(
        "A closed connection is finalised this many seconds (capture time) after its "
        "FIN/RST.", ge=0)] = 10.0


class BodiesSection(Section):
    """Message bodies."""

    capture: Annotated[bool, about(
        "Message bodies are not stored by default: only their size and SHA-256.")] = False
    cap_bytes: Annotated[int, about(
        "When capture = true, at most this many bytes of each body are kept.", ge=0)] = 4096


class AnalyticsSection(Section):
    """The analytics state machines."""

    return_window: Annotated[int, about(
        "Mandatory publishes per channel that wait for a possible basic.return "
        "(outside confirm mode); beyond that the oldest is taken as routed.", gt=0)] = 10_000
    return_wait_seconds: Annotated[float, about(
        "A mandatory publish not returned within this much capture time is taken as "
        "routed (RabbitMQ returns at once).", ge=0)] = 60.0


class FindingsSection(Section):
    """The findings rules' limits (docs/findings.md): what is worth an operator's attention."""

    ack_held_seconds: Annotated[float, about(
        "consumer-ack-timeout (warning): a delivery held unacknowledged this long, though the broker did not "
        "close the channel (RabbitMQ's consumer_timeout defaults to 30 minutes).", gt=0)] = 300.0
    redeliveries: Annotated[int, about(
        "redelivery-loop: one message redelivered this many times or more (a poison message; a "
        "quorum queue's x-delivery-limit ends the loop by dead-lettering it).", ge=1)] = 3
    missed_heartbeat_intervals: Annotated[float, about(
        "missed-heartbeats: a direction silent for more than this many agreed heartbeat intervals, on a "
        "connection that did not time out (it times out after 2).", gt=0)] = 1.5
    short_connection_seconds: Annotated[float, about(
        "connection-churn: a connection that lived at most this long is short-lived.", gt=0)] = 30.0
    connections_per_minute: Annotated[int, about(
        "connection-churn: short-lived connections one client host opened within any 60 seconds.", ge=1)] = 20
    channels_per_minute: Annotated[int, about(
        "channel-churn: channel.open frames on one connection within any 60 seconds.", ge=1)] = 30
    unbounded_outstanding: Annotated[int, about(
        "unbounded-prefetch: deliveries outstanding at once on a channel with no prefetch limit.", ge=1)] = 1000
    slow_consumer_p99_ms: Annotated[float, about(
        "slow-consumer: a consumer's deliver-to-ack 99th percentile above this, while its channel had "
        "slow_consumer_prefetch_fraction of its prefetch or more outstanding.", gt=0)] = 5000.0
    slow_consumer_prefetch_fraction: Annotated[float, about(
        "slow-consumer: the fraction of the channel's prefetch outstanding at once that makes a slow "
        "consumer the bottleneck (not the publishers).",
        gt=0, le=1)] = 0.9
    slow_rpc_ms: Annotated[float, about(
        "slow-rpc: a synchronous method (queue.declare, basic.qos, ...) answered after more than this.", gt=0)] = 1000.0
    large_message_bytes: Annotated[int, about(
        "large-message: a message body at least this large (RabbitMQ 4 refuses above 16 MiB by "
        "default, max_message_size).", gt=0)] = 4 << 20


class StateSection(Section):
    """Connections carried from one run to the next (docs/state.md)."""

    carry: Annotated[bool, about(
        "Save the state of connections still open when a run's captures end, and resume them "
        "in the run whose captures continue them.")] = True
    sensor: Annotated[str, about(
        "What captured the traffic: runs of different sensors (capture points) never "
        "continue each other's connections, even on the same 4-tuple.")] = "default"
    idle_limit_seconds: Annotated[float, about(
        "A connection silent this long before the captures' end is not carried: it ends "
        "with the capture.", ge=0)] = 3600.0
    max_gap_seconds: Annotated[float, about(
        "Saved state older than this when the connection's next packet comes is "
        "not resumed (the connection starts afresh, with an issue saying why).", ge=0)] = 2 * 86400.0
    seq_tolerance_bytes: Annotated[int, about(
        "The next packet must continue the saved TCP sequence within this many bytes, "
        "or the state is not resumed (another connection reused the 4-tuple, or another capture point).",
        ge=0)] = 1 << 20
    max_partial_body_bytes: Annotated[int, about(
        "A message cut by the end of a run keeps its body so far, up to this size, so "
        "its SHA-256 completes in the next run (beyond it the resumed message has no hash).", ge=0)] = 64 << 20


class LakeSection(Section):
    """The Delta lake."""

    path: Annotated[str, about(
        "Where the Delta tables live: a local path or any URI the Delta "
        "engine can write (s3://...). Tables are partitioned by the UTC date of the traffic.")] = "lake"
    engine: Annotated[Literal["auto", "delta-rs", "delta-spark"], about(
        "\"delta-rs\" (executors write Parquet, the driver commits it with deltalake), \"delta-spark\" "
        "(Spark writes the rows through Delta's own writer: a lake only Spark may write, e.g. Databricks; "
        "needs the Delta jars), or \"auto\": delta-rs, the faster (it commits the files the executors "
        "wrote, where delta-spark reads and writes every row again). Either reads the other's tables.")] = "auto"


class StorageSection(Section):
    """Object storage for captures and the lake; credentials come from each store's own chain, never settings."""

    s3_endpoint: Annotated[str, about(
        "An S3-compatible store's endpoint (MinIO, Ceph, R2...), e.g. \"http://storage:9000\"; "
        "empty: AWS itself, or AWS_ENDPOINT_URL when that is set. An http:// endpoint is allowed "
        "as such (no TLS).")] = ""


class JobSection(Section):
    """How the nightly job splits its work."""

    buckets: Annotated[int, about(
        "Connection buckets: each is decoded by one task (connections are hashed to "
        "buckets). 0: twice the Spark parallelism.", ge=0)] = 0
    split_bytes: Annotated[int, about(
        "Uncompressed capture files are read in byte ranges of about this size, "
        "several tasks per big file.", gt=0)] = 128 << 20
    staging: Annotated[str, about(
        "Where the read stage hands TCP segments to the decode stage: a directory every "
        "executor can reach. Empty: a temporary directory on local masters, else <lake>/_staging.")] = ""
    place_payloads: Annotated[bool, about(
        "On local masters, the read stage stages where each TCP payload of an uncompressed "
        "capture lies in it rather than a copy, and the decode stage reads the payloads from "
        "the capture: the night is not written to the staging directory once more. The "
        "captures must then stay as they are (appending is fine) until the run ends.")] = True


class MaintainSection(Section):
    """amqpcap maintain: table upkeep."""

    retention_hours: Annotated[int, about(
        "Files no longer in a table's current version are deleted once older than this "
        "(Delta vacuum); time travel to versions older than this is then lost.", ge=0)] = 168
    target_file_mb: Annotated[int, about(
        "Small files are compacted into files of about this size.", gt=0)] = 128


class SparkSection(Section):
    """The Spark session."""

    master: Annotated[str, about(
        "Spark master when not given on the command line; "
        "spark-submit's --master wins on a cluster.")] = "local[*]"
    app_name: Annotated[str, about("Spark application name.")] = "amqpcap"
    arrow_batch_rows: Annotated[int, about(
        "Rows per Arrow batch between the JVM and the Python workers (bounds worker "
        "memory).", gt=0)] = 10_000
    conf: Annotated[dict[str, str], about(
        "Any Spark setting; these are merged over the job's own.")] = field(
        default_factory=lambda: {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
                                 "spark.sql.session.timeZone": "UTC",
                                 # delta-spark replays a table's log in 50 tasks by default: most of
                                 # a commit's time on the lake's small logs (README: Engines)
                                 "spark.databricks.delta.snapshotPartitions": "2"})


class Settings(Section):
    decode: DecodeSection = field(default_factory=DecodeSection)
    reassembly: ReassemblySection = field(default_factory=ReassemblySection)
    bodies: BodiesSection = field(default_factory=BodiesSection)
    analytics: AnalyticsSection = field(default_factory=AnalyticsSection)
    findings: FindingsSection = field(default_factory=FindingsSection)
    state: StateSection = field(default_factory=StateSection)
    lake: LakeSection = field(default_factory=LakeSection)
    storage: StorageSection = field(default_factory=StorageSection)
    job: JobSection = field(default_factory=JobSection)
    maintain: MaintainSection = field(default_factory=MaintainSection)
    spark: SparkSection = field(default_factory=SparkSection)

    def replace(self, **sections: dict) -> "Settings":
        """A copy with some keys changed: replace(decode={"amqp_ports": (1,)}), validated."""
        return from_data(_merge(msgspec.to_builtins(self), sections), "settings")

    def to_json(self) -> str:
        return msgspec.json.encode(self).decode()

    @classmethod
    def from_json(cls, text: str) -> "Settings":
        return msgspec.json.decode(text, type=cls)


# -- loading -------------------------------------------------------------------------------------

def load_settings(path: str | Path | None = None, overrides: list[str] = ()) -> Settings:
    """The defaults, overridden by the TOML file at `path`, then by `section.key=value` overrides."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        import tomllib  # (here: most runs read no TOML file, and its import costs every start)
        try:
            data = tomllib.loads(Path(path).read_text())
        except OSError as error:
            raise SettingsError(f"cannot read config {path}: {error.strerror}") from None
        except tomllib.TOMLDecodeError as error:
            raise SettingsError(f"{path}: not valid TOML ({error})") from None
    for override in overrides:
        data = _merge(data, parse_override(override))
        source = f"{source} and --set"
    return from_data(data, source)


def from_data(data: dict[str, Any], source: str = "settings") -> Settings:
    """Settings from plain data (TOML's, JSON's): the defaults, with what `data` gives merged over them."""
    sections = Settings.__struct_fields__
    for name, value in data.items():
        if name not in sections:
            raise SettingsError(f"{source}: unknown section [{name}]; known: {', '.join(sections)}")
        if not isinstance(value, dict):
            raise SettingsError(f"{source}: [{name}] must be a table of keys")
    if not data:  # the declared defaults, valid as they are (conf/default.toml, all of them, loads as these)
        return Settings()
    merged = _merge(msgspec.to_builtins(Settings()), data)
    try:
        return msgspec.convert(merged, Settings)
    except msgspec.ValidationError as error:
        raise SettingsError(f"{source}: {_explain(str(error), merged)}") from None


def parse_override(text: str) -> dict[str, Any]:
    """`section.key=value`: the value as TOML (`[5672, 5673]`, `true`, `"x"`), else as text."""
    key, sep, value = text.partition("=")
    parts = key.strip().split(".")
    if not sep or len(parts) < 2 or not all(parts):
        raise SettingsError(f"--set takes section.key=value, not {text!r}")
    import tomllib
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()
    result: dict[str, Any] = {}
    node = result
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = parsed
    return result


def _merge(base: dict, over: dict) -> dict:
    """Tables merge key by key (so a file sets only what it changes); anything else is replaced."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _explain(message: str, data: dict) -> str:
    """msgspec's "<what> - at `$.section.key[i]`" as "section.key[i] = <value>: <what>"."""
    what, _, at = message.partition(" - at `$.")
    path = at.rstrip("`")
    steps = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    unknown = re.match(r"Object contains unknown field `(.+)`$", what)
    if unknown:
        known = msgspec.structs.fields(_field_type(steps)) if steps else ()
        return f"unknown key {path}.{unknown.group(1)}; known: {', '.join(f.name for f in known)}"
    if len(steps) < 2:  # a section's own check (__post_init__): its message says what
        return f"{path}: {what}" if path else what
    if path.endswith("[...]"):  # a value of a table such as spark.conf
        return f"{path.removesuffix('[...]')}: a value: {what}"
    value = data
    for step in steps:
        value = value[int(step[1:-1])] if step.startswith("[") else value.get(step)
    if what.startswith("Invalid enum value"):
        what = "must be one of " + ", ".join(repr(choice) for choice in get_args(_field_type(steps)))
    return f"{path} = {value!r}: {what}"


def _field_type(steps: list[str]):
    """The declared type at a path of section and key names (Annotated and its bounds taken off)."""
    kind = Settings
    for step in steps:
        if step.startswith("["):
            continue
        kind = next(f.type for f in msgspec.structs.fields(kind) if f.name == step)
        while get_origin(kind) is Annotated:
            kind = get_args(kind)[0]
    return kind


# -- rendering -------------------------------------------------------------------------------------

def to_toml(settings: Settings, comments: bool = False) -> str:
    """The settings as TOML; with `comments`, every key preceded by what it means (how
    conf/default.toml is generated)."""
    lines: list[str] = []
    for name in Settings.__struct_fields__:
        section = getattr(settings, name)
        tables = []
        lines.append(f"[{name}]")
        if comments and section.__doc__:
            lines.append(f"# {section.__doc__.strip()}")
        for key in msgspec.structs.fields(section):
            value = getattr(section, key.name)
            description = _description(key.type)
            if comments and description:
                lines += _comment(description)
            if isinstance(value, dict) and key.name == "conf":  # long: a table of its own
                tables.append((f"{name}.{key.name}", value))
                continue
            lines.append(f"{key.name} = {toml_value(value)}")
        for table, value in tables:
            lines += ["", f"[{table}]"] + [f"{_key(k)} = {toml_value(v)}" for k, v in value.items()]
        lines.append("")
    return "\n".join(lines)


def _description(kind) -> str | None:
    """The description `about` gave a key's type."""
    if get_origin(kind) is Annotated:
        for meta in get_args(kind)[1:]:
            if isinstance(meta, Meta) and meta.description:
                return meta.description
    return None


def toml_value(value) -> str:
    """One value as inline TOML."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }" if value else "{}"
    import tomli_w
    return tomli_w.dumps({"v": value}).strip()[4:]


def _key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() else toml_value(key)


def _comment(text: str, width: int = 100) -> list[str]:
    import textwrap
    return [f"# {line}" for line in textwrap.wrap(text, width - 2, break_on_hyphens=False)]
