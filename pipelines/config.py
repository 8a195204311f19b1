"""The job's settings: defaults in code, overridden by a TOML file (conf/default.toml documents
every key). An unknown section or key is an error that names it, so a typo never passes silently.

    config = load_config("conf/local.toml")
    config.decode_settings()      # what amqp_decode's CaptureDecoder takes
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amqp_decode.decoder import DecodeSettings
from amqp_decode.stream import StreamSettings


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class DecodeConfig:
    amqp_ports: tuple[int, ...] = (5672,)
    tls_ports: tuple[int, ...] = (5671,)
    default_version: str = "0-9-1"
    specs: dict[str, str] = field(default_factory=dict)  # version -> spec file (official XML format)
    field_table_dialect: str = "rabbitmq"
    max_frame_bytes: int = 16 << 20
    resync_max_frame_bytes: int = 1 << 20


@dataclass(frozen=True)
class ReassemblyConfig:
    window_bytes: int = 4 << 20
    close_grace_seconds: float = 10.0


@dataclass(frozen=True)
class BodiesConfig:
    capture: bool = False
    cap_bytes: int = 4096


@dataclass(frozen=True)
class LakeConfig:
    path: str = "lake"
    engine: str = "auto"  # "auto", "delta-rs", "delta-spark"
    partition_by: tuple[str, ...] = ("date",)


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    app_name: str = "amqpcap"
    arrow_batch_rows: int = 10_000
    conf: dict[str, str] = field(default_factory=lambda: {
        "spark.sql.shuffle.partitions": "8",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
    })


@dataclass(frozen=True)
class Config:
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    reassembly: ReassemblyConfig = field(default_factory=ReassemblyConfig)
    bodies: BodiesConfig = field(default_factory=BodiesConfig)
    lake: LakeConfig = field(default_factory=LakeConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)

    def decode_settings(self) -> DecodeSettings:
        d = self.decode
        return DecodeSettings(
            stream=StreamSettings(amqp_ports=frozenset(d.amqp_ports), tls_ports=frozenset(d.tls_ports),
                                  default_version=d.default_version, max_frame=d.max_frame_bytes,
                                  resync_max_frame=d.resync_max_frame_bytes,
                                  capture_bodies=self.bodies.capture, body_cap=self.bodies.cap_bytes),
            specs=tuple(sorted(d.specs.items())), dialect=d.field_table_dialect,
            reassembly_window=self.reassembly.window_bytes,
            close_grace_seconds=self.reassembly.close_grace_seconds)


ENGINES = ("auto", "delta-rs", "delta-spark")


def load_config(path: str | Path | None = None) -> Config:
    """The defaults, overridden by the TOML file at `path` when given."""
    if path is None:
        return Config()
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as error:
        raise ConfigError(f"cannot read config {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from None
    return from_dict(data, str(path))


def from_dict(data: dict[str, Any], source: str = "config") -> Config:
    sections = {}
    for name, value in data.items():
        section = next((f for f in dataclasses.fields(Config) if f.name == name), None)
        if section is None:
            raise ConfigError(f"{source}: unknown section [{name}]; known: "
                              f"{', '.join(f.name for f in dataclasses.fields(Config))}")
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: [{name}] must be a table")
        sections[name] = _section(section.default_factory, value, f"{source}: [{name}]")
    config = Config(**sections)
    if config.lake.engine not in ENGINES:
        raise ConfigError(f"{source}: lake.engine must be one of {', '.join(ENGINES)}, "
                          f"not {config.lake.engine!r}")
    return config


def _section(cls, values: dict[str, Any], where: str):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    defaults = cls()
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(f"{where}: unknown key {key!r}; known: {', '.join(fields)}")
        default = getattr(defaults, key)
        if isinstance(default, tuple):
            if not isinstance(value, list):
                raise ConfigError(f"{where}: {key} must be a list")
            value = tuple(value)
        elif isinstance(default, dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {key} must be a table")
            value = {**default, **{str(k): str(v) for k, v in value.items()}} \
                if key == "conf" else {str(k): str(v) for k, v in value.items()}
        elif isinstance(default, bool) != isinstance(value, bool) or \
                not isinstance(value, (type(default), int) if isinstance(default, float) else type(default)):
            raise ConfigError(f"{where}: {key} must be a {type(default).__name__}, not {value!r}")
        kwargs[key] = value
    return cls(**kwargs)


def as_dict(config: Config) -> dict[str, Any]:
    """The config as TOML-shaped data (tuples as lists)."""
    def plain(value):
        if isinstance(value, tuple):
            return list(value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value
    return {section.name: {f.name: plain(getattr(getattr(config, section.name), f.name))
                           for f in dataclasses.fields(getattr(config, section.name))}
            for section in dataclasses.fields(config)}
