"""On the samples' lake written by the job: deliveries, publishes and message_flows join their
messages rows by message_key alone, one to one, and agree with them on what the old multi-column
keys matched (connection, channel, delivery tag, time)."""

from __future__ import annotations

from amqpcap.lake.spark_read import read_table


def test_messages_are_keyed_once(spark, lake):
    path, _ = lake
    read_table(spark, path, "messages").createOrReplaceTempView("k_messages")
    (row,) = spark.sql("SELECT count(*) AS n, count(DISTINCT message_key) AS keys, count(message_key) AS set "
                       "FROM k_messages").collect()
    assert row.n > 0 and row.n == row.keys == row.set


def test_deliveries_and_publishes_join_their_messages_by_message_key(spark, lake):
    path, _ = lake
    for name in ("messages", "deliveries", "publishes"):
        read_table(spark, path, name).createOrReplaceTempView(f"k_{name}")
    (row,) = spark.sql("""
        SELECT count(*) AS deliveries, count(m.message_key) AS joined,
               count_if(m.connection = d.connection AND m.channel = d.channel AND m.delivery_tag = d.delivery_tag
                        AND m.ts = d.delivered_at AND m.method = d.method
                        AND m.message_id <=> d.message_id AND m.body_sha256 <=> d.body_sha256) AS agree
        FROM k_deliveries d LEFT JOIN k_messages m USING (message_key)""").collect()
    assert row.deliveries > 0 and row.deliveries == row.joined == row.agree
    (row,) = spark.sql("""
        SELECT count(*) AS publishes, count(m.message_key) AS joined,
               count_if(m.connection = p.connection AND m.channel = p.channel AND m.ts = p.published_at
                        AND m.method = 'basic.publish' AND m.routing_key <=> p.routing_key
                        AND m.correlation_id <=> p.correlation_id AND m.app_id <=> p.app_id) AS agree
        FROM k_publishes p LEFT JOIN k_messages m USING (message_key)""").collect()
    assert row.publishes > 0 and row.publishes == row.joined == row.agree
    # and every publish and delivery message has its row
    (row,) = spark.sql("""
        SELECT count_if(m.method = 'basic.publish' AND p.message_key IS NULL) AS publishes_missing,
               count_if(m.method IN ('basic.deliver', 'basic.get-ok') AND d.message_key IS NULL) AS deliveries_missing
        FROM k_messages m LEFT JOIN k_publishes p USING (message_key) LEFT JOIN k_deliveries d USING (message_key)
        """).collect()
    assert (row.publishes_missing, row.deliveries_missing) == (0, 0)


def test_message_flows_join_both_sides_by_message_key(spark, lake):
    path, _ = lake
    for name in ("messages", "deliveries", "publishes", "message_flows"):
        read_table(spark, path, name).createOrReplaceTempView(f"k_{name}")
    (row,) = spark.sql("""
        SELECT count(*) AS deliveries, count(f.message_key) AS flows,
               count_if(f.consumer_connection = d.connection AND f.consumer_channel = d.channel
                        AND f.delivery_tag = d.delivery_tag AND f.delivered_at = d.delivered_at
                        AND f.outcome = d.outcome) AS agree
        FROM k_deliveries d LEFT JOIN k_message_flows f USING (message_key)""").collect()
    assert row.deliveries > 0 and row.deliveries == row.flows == row.agree  # one flow row per delivery
    (row,) = spark.sql("""
        SELECT count(*) AS with_publish, count(p.message_key) AS joined, count(m.message_key) AS messages,
               count_if(f.publisher_connection = p.connection AND f.published_at = p.published_at) AS agree,
               count(DISTINCT f.publish_message_key) AS publishes
        FROM k_message_flows f LEFT JOIN k_publishes p ON p.message_key = f.publish_message_key
        LEFT JOIN k_messages m ON m.message_key = f.publish_message_key
        WHERE f.publish_message_key IS NOT NULL""").collect()
    assert row.with_publish == row.joined == row.messages == row.agree > 0
    assert row.publishes == spark.table("k_publishes").count()
    matched = spark.sql("SELECT count(*) AS n FROM k_message_flows WHERE match IS NOT NULL").collect()[0].n
    both = spark.sql("SELECT count(*) AS n FROM k_message_flows "
                     "WHERE message_key IS NOT NULL AND publish_message_key IS NOT NULL").collect()[0].n
    assert matched == both > 0
