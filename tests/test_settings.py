"""The settings: one declaration, its documented defaults, validation before any work, and the
command line that shows and overrides them."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from amqpcap.settings import Settings, SettingsError, from_data, load_settings, to_toml
from tests.helpers.samples import ROOT

HEADER_LINES = 4  # the comment above the generated part of conf/default.toml


def test_default_toml_is_generated_from_the_declaration():
    text = (ROOT / "conf" / "default.toml").read_text()
    assert "\n".join(text.splitlines()[HEADER_LINES:]) + "\n" == to_toml(Settings(), comments=True)
    assert load_settings(ROOT / "conf" / "default.toml") == Settings()


@pytest.mark.parametrize("name", ["local.toml", "cluster.toml"])
def test_examples_load(name):
    assert load_settings(ROOT / "conf" / name) != Settings()


def test_tables_merge_over_the_defaults_and_overrides_win():
    settings = load_settings(ROOT / "conf" / "local.toml", ["decode.amqp_ports=[5672, 5673]", "lake.path=/data/x",
                                                            'spark.conf={"spark.x" = "1"}'])
    assert settings.decode.amqp_ports == (5672, 5673) and settings.decode.tls_ports == (5671,)
    assert settings.lake.path == "/data/x"
    assert settings.spark.conf["spark.x"] == "1" and settings.spark.conf["spark.sql.session.timeZone"] == "UTC"
    assert settings.spark.conf["spark.driver.memory"] == "4g"  # from local.toml, kept


def test_settings_travel_whole_as_json():
    settings = load_settings(None, ["decode.amqp_ports=[1, 2]", "bodies.capture=true", "reassembly.window_bytes=7",
                                    'decode.specs={"0-9" = "spec/amqp0-9.xml"}', "job.buckets=3"])
    assert Settings.from_json(settings.to_json()) == settings


@pytest.mark.parametrize("override, message", [
    ('decode.field_table_dialect="bogus"', "decode.field_table_dialect = 'bogus': must be one of 'rabbitmq', 'spec'"),
    ('decode.default_version="1-0"', "default_version '1-0' is none of 0-9, 0-9-1"),
    ("reassembly.window_bytes=-5", "reassembly.window_bytes = -5: Expected `int` >= 1"),
    ("spark.arrow_batch_rows=-5", "spark.arrow_batch_rows = -5: Expected `int` >= 1"),
    ('lake.engine="delta-go"', "lake.engine = 'delta-go': must be one of 'auto', 'delta-rs', 'delta-spark'"),
    ('decode.specs={"0-9-1" = "/missing.xml"}', "cannot read spec file /missing.xml"),
    ("decode.amqp_ports=[5672, 70000]", "decode.amqp_ports[1] = 70000: Expected `int` <= 65535"),
    ("decode.amqp_port=[1]", "unknown key decode.amqp_port; known: amqp_ports"),
    ("decoder.x=1", "unknown section [decoder]"),
    ('spark.conf={"spark.x" = 1}', "spark.conf: a value: Expected `str`, got `int`"),
    ("reassembly.close_grace_seconds=-1", "reassembly.close_grace_seconds = -1: Expected `float` >= 0.0"),
    ('bodies.capture="yes"', "bodies.capture = 'yes': Expected `bool`, got `str`"),
])
def test_bad_values_are_named_in_one_line(override, message):
    with pytest.raises(SettingsError) as error:
        load_settings(None, [override])
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_spec_file_that_does_not_parse(tmp_path):
    bad = tmp_path / "spec.xml"
    bad.write_text("this is not XML")
    with pytest.raises(SettingsError, match="not well-formed XML"):
        load_settings(None, [f'decode.specs={{"0-9-1" = "{bad}"}}'])


def test_unreadable_config(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[decode\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(bad)
    with pytest.raises(SettingsError, match="cannot read config"):
        load_settings(tmp_path / "missing.toml")
    with pytest.raises(SettingsError, match=r"\[lake\] must be a table"):
        from_data({"lake": "x"})


def amqpcap(*argv):
    return subprocess.run([sys.executable, "-m", "amqpcap", *argv], capture_output=True, text=True, cwd=ROOT)


def test_config_command_prints_the_effective_settings():
    result = amqpcap("config", "--config", "conf/cluster.toml", "--set", "job.buckets=5")
    assert result.returncode == 0
    printed = tomllib.loads(result.stdout)
    assert printed["job"]["buckets"] == 5 and printed["lake"]["engine"] == "delta-spark"
    assert from_data(printed) == load_settings(ROOT / "conf" / "cluster.toml", ["job.buckets=5"])


@pytest.mark.parametrize("argv", [
    ["run", "--input", "data/samples/heartbeats.pcap", "--lake", "/tmp/x", "--set", 'decode.field_table_dialect="bogus"'],
    ["run", "--input", "data/samples/heartbeats.pcap", "--lake", "/tmp/x", "--set", "spark.arrow_batch_rows=-5"],
    ["decode", "--spec", "0-9-1=/missing.xml", "data/samples/heartbeats.pcap"],
    ["analyze", "--lake", "/tmp/x", "--set", 'decode.default_version="1-0"'],
])
def test_bad_settings_exit_2_with_one_line_before_any_work(argv):
    result = amqpcap(*argv)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("amqpcap: ")
    assert "Traceback" not in result.stderr
    # and Spark was never started: the command fails before importing it
    probe = subprocess.run([sys.executable, "-c", "import sys; from amqpcap.cli import main; "
                            f"code = main({argv!r}); print(code, 'pyspark' in sys.modules)"],
                           capture_output=True, text=True, cwd=ROOT)
    assert probe.stdout.split() == ["2", "False"]
