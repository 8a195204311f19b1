"""Spark's view of the lake's tables (amqp_decode.tables declares them once)."""

from __future__ import annotations

from amqp_decode.tables import Table


def struct_type(table: Table, without: tuple[str, ...] = ()):
    from pyspark.sql import types as T
    simple = {"string": T.StringType(), "bigint": T.LongType(), "int": T.IntegerType(),
              "boolean": T.BooleanType(), "double": T.DoubleType(), "date": T.DateType(),
              "binary": T.BinaryType(), "timestamp": T.TimestampType(),
              "array<string>": T.ArrayType(T.StringType()),
              "map<string,string>": T.MapType(T.StringType(), T.StringType())}
    return T.StructType([T.StructField(c.name, simple[c.type], True, {"comment": c.comment})
                         for c in table.columns if c.name not in without])
