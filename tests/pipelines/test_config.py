from __future__ import annotations

import pytest

from pipelines.config import Config, ConfigError, as_dict, from_dict, load_config
from tests.conftest import ROOT


def test_default_toml_documents_exactly_the_defaults():
    assert load_config(ROOT / "conf" / "default.toml") == Config()
    assert as_dict(load_config(ROOT / "conf" / "default.toml")) == as_dict(Config())


@pytest.mark.parametrize("name", ["local.toml", "cluster.toml"])
def test_examples_load(name):
    config = load_config(ROOT / "conf" / name)
    assert config != Config()


def test_overrides_merge_over_defaults():
    config = from_dict({"decode": {"amqp_ports": [5672, 5673]}, "spark": {"conf": {"spark.x": 1}}})
    assert config.decode.amqp_ports == (5672, 5673)
    assert config.decode.tls_ports == (5671,)
    assert config.spark.conf["spark.x"] == "1"
    assert config.spark.conf["spark.sql.session.timeZone"] == "UTC"
    settings = config.decode_settings()
    assert settings.stream.amqp_ports == frozenset({5672, 5673})


@pytest.mark.parametrize("data, message", [
    ({"decoder": {}}, "unknown section [decoder]"),
    ({"decode": {"amqp_port": [1]}}, "unknown key 'amqp_port'"),
    ({"decode": {"amqp_ports": 5672}}, "amqp_ports must be a list"),
    ({"bodies": {"capture": "yes"}}, "capture must be a bool"),
    ({"bodies": {"cap_bytes": True}}, "cap_bytes must be a int"),
    ({"lake": {"engine": "delta-go"}}, "lake.engine must be one of"),
    ({"lake": "x"}, "[lake] must be a table"),
])
def test_bad_settings_are_named(data, message):
    with pytest.raises(ConfigError) as error:
        from_dict(data, "my.toml")
    assert message in str(error.value) and "my.toml" in str(error.value)


def test_unreadable_config(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[decode\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.toml")
