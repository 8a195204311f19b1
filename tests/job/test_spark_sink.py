"""The delta-spark engine's commit, without Spark: which rows a run's commit replaces (its
`replaceWhere`), and the run it names in Spark's commit info, read back as delta-rs's tag is."""

from __future__ import annotations

from amqpcap.job.spark_sink import replace_condition
from amqpcap.lake.runlog import RUN_TAG, run_of, run_tag
from amqpcap.tables.registry import TABLES


def test_a_run_replaces_its_captures_rows_and_the_provisional_rows_it_supersedes():
    frames, flows = TABLES["frames"], TABLES["message_flows"]
    assert replace_condition(frames, None, ()) is None  # a rebuild: every row
    assert replace_condition(frames, set(), ()) == ""  # nothing replaced: an append
    assert replace_condition(frames, {"s3://b/b.pcap", "s3://b/a.pcap"}, ()) == \
        "source IN ('s3://b/a.pcap', 's3://b/b.pcap')"
    assert replace_condition(TABLES["captures"], {"x"}, ()) == "path IN ('x')"
    both = replace_condition(flows, {"n2.pcap"}, [("c1", "n1.pcap")])
    assert both == ("source IN ('n2.pcap') OR (provisional AND ((publisher_connection = 'c1' AND source = 'n1.pcap') "
                    "OR (consumer_connection = 'c1' AND source = 'n1.pcap')))")


def test_quotes_and_backslashes_in_a_capture_name_stay_inside_the_literal():
    condition = replace_condition(TABLES["frames"], {"/caps/it's\\x.pcap"}, ())
    assert condition == "source IN ('/caps/it\\'s\\\\x.pcap')"


def test_either_engines_tag_names_the_run():
    assert run_of({RUN_TAG: "r1"}) == "r1"  # delta-rs's commit info
    assert run_of({"userMetadata": run_tag("r2")}) == "r2"  # Spark's
    assert run_of({"userMetadata": "someone else's note"}) is None
    assert run_of({}) is None
