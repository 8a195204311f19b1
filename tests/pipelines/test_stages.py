"""The job's stages as DataFrame -> DataFrame transforms, on small DataFrames (chispa)."""

from __future__ import annotations

import pyarrow as pa
from chispa import assert_df_equality

from amqp_decode.decoder import CaptureDecoder, DecodeSettings
from pipelines.inputs import list_inputs
from pipelines.schemas import FRAMES
from pipelines.stages import (CAPTURE_KEY, SEGMENTS_DDL, by_connection, decode_connections,
                              read_segments, settings_from_json, settings_to_json, untag)
from tests.capture.conftest import SAMPLES


def listing(spark, *names):
    files = list_inputs([str(SAMPLES / n) for n in names])
    return spark.createDataFrame([(i, f.uri, f.size) for i, f in enumerate(files)],
                                 "file_index int, uri string, size bigint"), [f.uri for f in files]


def test_read_segments_one_row_per_segment_plus_one_per_file(spark):
    files, _ = listing(spark, "heartbeats.pcap", "abrupt_kill.pcap")
    segments = read_segments(files, batch_rows=7)
    decoder = CaptureDecoder()
    list(decoder.decode([str(SAMPLES / "heartbeats.pcap"), str(SAMPLES / "abrupt_kill.pcap")]))
    assert segments.where(f"key != '{CAPTURE_KEY}'").count() == decoder.stats.tcp_segments
    captures = segments.where(f"key = '{CAPTURE_KEY}'").select("file_index").orderBy("file_index")
    assert_df_equality(captures, spark.createDataFrame([(0,), (1,)], "file_index int"))


def test_by_connection_groups_and_orders(spark):
    rows = [("b|c", 30, 0, 1), ("a|b", 20, 1, 0), ("b|c", 10, 0, 0), ("a|b", 20, 0, 5), ("a|b", 5, 1, 1)]
    full = [(k, t, f, p, None, 0, None, 0, 0, 0, 0, None, None) for k, t, f, p in rows]
    df = spark.createDataFrame(full, SEGMENTS_DDL)
    grouped = by_connection(df, partitions=1).select("key", "ts_ns", "file_index", "packet_index")
    expected = spark.createDataFrame(
        [("a|b", 5, 1, 1), ("a|b", 20, 0, 5), ("a|b", 20, 1, 0), ("b|c", 10, 0, 0), ("b|c", 30, 0, 1)],
        "key string, ts_ns bigint, file_index int, packet_index bigint")
    assert_df_equality(grouped, expected)  # order matters: the decoder relies on it


def test_decode_connections_matches_the_library(spark):
    files, uris = listing(spark, "returns_nack_reject.pcap")
    tagged = decode_connections(by_connection(read_segments(files, 50), 2), DecodeSettings(), uris,
                                "run-t", batch_rows=20)
    frames = [untag(r.batch) for r in tagged.where("table = 'frames'").collect()]
    got = pa.Table.from_batches(frames, schema=FRAMES.arrow()).select(["direction", "kind", "method"])
    records = [r for r in CaptureDecoder().decode(uris) if r["kind"] != "issue"]
    assert sorted(got.to_pylist(), key=str) == sorted(
        ({"direction": r["dir"], "kind": r["kind"], "method": r.get("method")} for r in records), key=str)
    assert max(b.num_rows for b in frames) <= 20


def test_settings_travel_as_json():
    from amqp_decode.stream import StreamSettings
    settings = DecodeSettings(stream=StreamSettings(amqp_ports=frozenset({1, 2}), capture_bodies=True),
                              specs=(("0-9-1", "/x.xml"),), reassembly_window=7)
    assert settings_from_json(settings_to_json(settings)) == settings
