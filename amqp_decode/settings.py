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

import tomllib
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator, model_validator

from amqp_decode.errors import SpecError
from amqp_decode.spec import BUNDLED, load_spec


class SettingsError(Exception):
    """Settings that cannot be used; the message names the key and the value."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


Port = Field(ge=1, le=65535)


class DecodeSection(Section):
    """How bytes become AMQP frames."""

    amqp_ports: tuple[int, ...] = Field(
        (5672,), description="Ports whose traffic is AMQP even when the connection's start was not captured. "
        "AMQP on any other port is still found by its protocol header.")
    tls_ports: tuple[int, ...] = Field(
        (5671,), description="Ports whose traffic is TLS: counted and reported as an issue, not decoded.")
    default_version: str = Field(
        "0-9-1", description="Spec for connections whose protocol header was not captured: \"0-9-1\" or "
        "\"0-9\" (or a version given in specs).")
    specs: dict[str, str] = Field(
        default_factory=dict, description="Use another spec file (official AMQP XML format) for a version, "
        "e.g. { \"0-9-1\" = \"my.xml\" }.")
    field_table_dialect: Literal["rabbitmq", "spec"] = Field(
        "rabbitmq", description="Field-table tags: \"rabbitmq\" ('s' = int16, 'l' = int64, as RabbitMQ and Qpid "
        "send) or \"spec\" (the 0-9-1 PDF: 's' = short string, 'l' = uint64).")
    max_frame_bytes: int = Field(
        16 << 20, gt=0, description="A frame claiming a larger payload is treated as corrupt (framing "
        "resynchronises).")
    resync_max_frame_bytes: int = Field(
        1 << 20, gt=0, description="Largest frame a resynchronisation candidate may claim; bounds what is "
        "buffered while searching.")
    pending_records: int = Field(
        10_000, gt=0, description="Records held per connection while its client side is still unknown (then "
        "it is guessed from the ports).")

    @field_validator("amqp_ports", "tls_ports")
    @classmethod
    def _ports(cls, ports: tuple[int, ...]) -> tuple[int, ...]:
        for port in ports:
            if not 1 <= port <= 65535:
                raise ValueError(f"{port} is not a TCP port (1-65535)")
        return ports

    @model_validator(mode="after")
    def _specs(self) -> "DecodeSection":
        for version, path in self.specs.items():
            try:
                load_spec(path)
            except SpecError as error:
                raise ValueError(f"specs.{version}: {error}") from None
        known = set(BUNDLED) | set(self.specs)
        if self.default_version not in known:
            raise ValueError(f"default_version {self.default_version!r} is none of {', '.join(sorted(known))}")
        return self


class ReassemblySection(Section):
    """TCP reassembly."""

    window_bytes: int = Field(
        4 << 20, gt=0, description="Out-of-order bytes held per connection direction before the hole is "
        "declared a gap.")
    close_grace_seconds: float = Field(
        10.0, ge=0, description="A closed connection is finalised this many seconds (capture time) after its "
        "FIN/RST.")


class BodiesSection(Section):
    """Message bodies."""

    capture: StrictBool = Field(
        False, description="Message bodies are not stored by default: only their size and SHA-256.")
    cap_bytes: int = Field(4096, ge=0, description="When capture = true, at most this many bytes of each body "
                           "are kept.")


class AnalyticsSection(Section):
    """The analytics state machines."""

    return_window: int = Field(
        10_000, gt=0, description="Mandatory publishes per channel that wait for a possible basic.return "
        "(outside confirm mode); beyond that the oldest is taken as routed.")
    return_wait_seconds: float = Field(
        60.0, ge=0, description="A mandatory publish not returned within this much capture time is taken as "
        "routed (RabbitMQ returns at once).")


class StateSection(Section):
    """Connections carried from one run to the next (docs/state.md)."""

    carry: StrictBool = Field(
        True, description="Save the state of connections still open when a run's captures end, and resume them "
        "in the run whose captures continue them.")
    sensor: str = Field(
        "default", description="What captured the traffic: runs of different sensors (capture points) never "
        "continue each other's connections, even on the same 4-tuple.")
    idle_limit_seconds: float = Field(
        3600.0, ge=0, description="A connection silent this long before the captures' end is not carried: it ends "
        "with the capture.")
    max_gap_seconds: float = Field(
        2 * 86400.0, ge=0, description="Saved state older than this when the connection's next packet comes is "
        "not resumed (the connection starts afresh, with an issue saying why).")
    seq_tolerance_bytes: int = Field(
        1 << 20, ge=0, description="The next packet must continue the saved TCP sequence within this many bytes, "
        "or the state is not resumed (another connection reused the 4-tuple, or another capture point).")
    max_partial_body_bytes: int = Field(
        64 << 20, ge=0, description="A message cut by the end of a run keeps its body so far, up to this size, so "
        "its SHA-256 completes in the next run (beyond it the resumed message has no hash).")


class LakeSection(Section):
    """The Delta lake."""

    path: str = Field("lake", description="Where the Delta tables live: a local path or any URI the Delta "
                      "engine can write (s3://...). Tables are partitioned by the UTC date of the traffic.")
    engine: Literal["auto", "delta-rs", "delta-spark"] = Field(
        "auto", description="\"delta-rs\" (embedded default: executors write Parquet, the driver commits with "
        "deltalake), \"delta-spark\" (Delta jars on the classpath, e.g. a cluster or Databricks), or \"auto\" "
        "(delta-spark when its classes load, else delta-rs).")


class JobSection(Section):
    """How the nightly job splits its work."""

    buckets: int = Field(
        0, ge=0, description="Connection buckets: each is decoded by one task (connections are hashed to "
        "buckets). 0: twice the Spark parallelism.")
    split_bytes: int = Field(
        128 << 20, gt=0, description="Uncompressed capture files are read in byte ranges of about this size, "
        "several tasks per big file.")
    staging: str = Field(
        "", description="Where the read stage hands TCP segments to the decode stage: a directory every "
        "executor can reach. Empty: a temporary directory on local masters, else <lake>/_staging.")


class MaintainSection(Section):
    """amqpcap maintain: table upkeep."""

    retention_hours: int = Field(
        168, ge=0, description="Files no longer in a table's current version are deleted once older than this "
        "(Delta vacuum); time travel to versions older than this is then lost.")
    target_file_mb: int = Field(128, gt=0, description="Small files are compacted into files of about this size.")


class SparkSection(Section):
    """The Spark session."""

    master: str = Field("local[*]", description="Spark master when not given on the command line; "
                        "spark-submit's --master wins on a cluster.")
    app_name: str = Field("amqpcap", description="Spark application name.")
    arrow_batch_rows: int = Field(
        10_000, gt=0, description="Rows per Arrow batch between the JVM and the Python workers (bounds worker "
        "memory).")
    conf: dict[str, str] = Field(
        default_factory=lambda: {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false",
                                 "spark.sql.session.timeZone": "UTC"},
        description="Any Spark setting; these are merged over the job's own.")


class Settings(Section):
    decode: DecodeSection = Field(default_factory=DecodeSection)
    reassembly: ReassemblySection = Field(default_factory=ReassemblySection)
    bodies: BodiesSection = Field(default_factory=BodiesSection)
    analytics: AnalyticsSection = Field(default_factory=AnalyticsSection)
    state: StateSection = Field(default_factory=StateSection)
    lake: LakeSection = Field(default_factory=LakeSection)
    job: JobSection = Field(default_factory=JobSection)
    maintain: MaintainSection = Field(default_factory=MaintainSection)
    spark: SparkSection = Field(default_factory=SparkSection)

    def replace(self, **sections: dict) -> "Settings":
        """A copy with some keys changed: replace(decode={"amqp_ports": (1,)}), validated."""
        return from_data(_merge(self.model_dump(), sections), "settings")

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> "Settings":
        return cls.model_validate_json(text)


# -- loading -------------------------------------------------------------------------------------

def load_settings(path: str | Path | None = None, overrides: list[str] = ()) -> Settings:
    """The defaults, overridden by the TOML file at `path`, then by `section.key=value` overrides."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
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
    defaults = Settings().model_dump()
    for name, value in data.items():
        if name not in Settings.model_fields:
            raise SettingsError(f"{source}: unknown section [{name}]; known: {', '.join(Settings.model_fields)}")
        if not isinstance(value, dict):
            raise SettingsError(f"{source}: [{name}] must be a table of keys")
    try:
        return Settings.model_validate(_merge(defaults, data))
    except ValidationError as error:
        raise SettingsError(f"{source}: " + "; ".join(_explain(e) for e in error.errors())) from None


def parse_override(text: str) -> dict[str, Any]:
    """`section.key=value`: the value as TOML (`[5672, 5673]`, `true`, `"x"`), else as text."""
    key, sep, value = text.partition("=")
    parts = key.strip().split(".")
    if not sep or len(parts) < 2 or not all(parts):
        raise SettingsError(f"--set takes section.key=value, not {text!r}")
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


def _explain(error: dict) -> str:
    where = ".".join(str(p) for p in error["loc"] if not isinstance(p, int))
    if error["type"] == "extra_forbidden":
        section = error["loc"][0]
        fields = Settings.model_fields[section].annotation.model_fields if section in Settings.model_fields else {}
        return f"unknown key {where}; known: {', '.join(fields)}"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "value_error" or "input" not in error:
        return f"{where}: {message}"
    return f"{where} = {error['input']!r}: {message}"


# -- rendering -------------------------------------------------------------------------------------

def to_toml(settings: Settings, comments: bool = False) -> str:
    """The settings as TOML; with `comments`, every key preceded by what it means (how
    conf/default.toml is generated)."""
    lines: list[str] = []
    for name, field in Settings.model_fields.items():
        section = getattr(settings, name)
        tables = []
        lines.append(f"[{name}]")
        if comments and section.__doc__:
            lines.append(f"# {section.__doc__.strip()}")
        for key, spec in type(section).model_fields.items():
            value = getattr(section, key)
            if comments and spec.description:
                lines += _comment(spec.description)
            if isinstance(value, dict) and key == "conf":  # long: a table of its own
                tables.append((f"{name}.{key}", value))
                continue
            lines.append(f"{key} = {toml_value(value)}")
        for table, value in tables:
            lines += ["", f"[{table}]"] + [f"{_key(k)} = {toml_value(v)}" for k, v in value.items()]
        lines.append("")
    return "\n".join(lines)


def toml_value(value) -> str:
    """One value as inline TOML."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }" if value else "{}"
    return tomli_w.dumps({"v": value}).strip()[4:]


def _key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() else toml_value(key)


def _comment(text: str, width: int = 100) -> list[str]:
    import textwrap
    return [f"# {line}" for line in textwrap.wrap(text, width - 2, break_on_hyphens=False)]
