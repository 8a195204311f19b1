"""The Delta jars' bookkeeping (amqpcap.job.jars): which of a fetched closure Spark ships itself
(left out), and jars fetched for another delta-spark never taken for this one's."""

from __future__ import annotations

from amqpcap.job import jars


def test_the_closure_leaves_out_what_spark_ships_whatever_its_version():
    assert jars.artifact("com.github.luben_zstd-jni-1.5.7-3.jar", grouped=True) == jars.artifact("zstd-jni-1.5.6-10.jar")
    assert jars.artifact("org.apache.hadoop_hadoop-client-api-3.4.2.jar", grouped=True) == "hadoop-client-api"
    assert jars.artifact("io.delta_delta-spark_4.2_2.13-4.4.0.jar", grouped=True) == "delta-spark_4.2_2.13"
    assert jars.artifact("commons-pool_commons-pool-1.6.jar", grouped=True) == "commons-pool"
    assert jars.artifact("spark-core_2.13-4.2.0.jar") == "spark-core_2.13"


def test_jars_fetched_for_another_delta_spark_are_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(jars, "JARS_DIR", tmp_path)
    (tmp_path / "io.delta_delta-spark_4.2_2.13-4.3.0.jar").write_bytes(b"")
    assert jars.installed() == []  # no marker: not fetched
    (tmp_path / jars.MARKER).write_text("io.delta:delta-spark_4.2_2.13:4.3.0\n")
    assert jars.installed() == []  # fetched for another version
    (tmp_path / jars.MARKER).write_text(jars.delta_coordinate() + "\n")
    assert jars.installed() == []  # without hadoop-aws: fetched by an older amqpcap
    (tmp_path / jars.MARKER).write_text("\n".join([*jars.wanted(), "software.amazon.awssdk:s3:2.35.4"]) + "\n")
    assert jars.installed() == [str(tmp_path / "io.delta_delta-spark_4.2_2.13-4.3.0.jar")]
    assert jars.delta_coordinate().startswith("io.delta:delta-spark_4.2_2.13:")
    assert jars.hadoop_aws_coordinate() == "org.apache.hadoop:hadoop-aws:3.5.0"  # Spark 4.2's Hadoop


def test_the_fetched_jars_hold_delta_and_s3a_without_the_sdk_bundle():
    """(What make setup fetched here.)"""
    names = [j.rsplit("/", 1)[1] for j in jars.installed()]
    assert any(n.startswith("io.delta_delta-spark_4.2_2.13-") for n in names)
    assert "org.apache.hadoop_hadoop-aws-3.5.0.jar" in names
    assert any(n.startswith("software.amazon.awssdk_s3-2.") for n in names)
    assert not any(n.startswith("software.amazon.awssdk_bundle") for n in names)
