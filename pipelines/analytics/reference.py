"""Small lookup DataFrames taken from the spec: reply codes and method names."""

from __future__ import annotations

from amqp_decode.spec import load_spec


def reply_codes(spark, version: str = "0-9-1"):
    """reply_code -> reply_name (NOT_FOUND...), code_class (soft-error / hard-error)."""
    spec = load_spec(version)
    rows = [(c.value, c.name.upper().replace("-", "_"), c.error_class)
            for c in spec.constants.values() if c.error_class]
    return spark.createDataFrame(rows, "reply_code int, reply_name string, code_class string")


def method_names(spark, version: str = "0-9-1"):
    """(class_id, method_id) -> method name ('queue.declare')."""
    rows = [(m.class_id, m.method_id, m.full_name) for m in load_spec(version).methods()]
    return spark.createDataFrame(rows, "class_id int, method_id int, method_name string")
