"""The table registry: every table declared once, with its docs, Arrow and Spark schemas agreeing."""

from __future__ import annotations

import subprocess
import sys
import typing

import pyarrow as pa

from amqpcap.tables.registry import ANALYTICS_TABLES, LOG_TABLES, RAW_TABLES, STATE_TABLES, TABLES, markdown
from tests.helpers.samples import ROOT


def test_docs_tables_md_is_generated_from_the_declarations():
    generated = subprocess.run([sys.executable, "-m", "amqpcap.tables.registry"], capture_output=True,
                               text=True, check=True, cwd=ROOT).stdout
    assert (ROOT / "docs" / "tables.md").read_text() == generated == markdown()


def test_every_column_is_commented_once_with_one_type():
    for table in RAW_TABLES + ANALYTICS_TABLES + STATE_TABLES + LOG_TABLES:
        assert len(set(table.names)) == len(table.names), table.name
        assert all(c.comment for c in table.columns)
        assert table.names[0] == "date" and "run_id" in table.names
        assert table.replace_key in table.names
        # the row TypedDict is the declaration: its keys are the columns, in order
        assert list(typing.get_type_hints(table.row)) == table.names
    assert set(TABLES) == {t.name for t in RAW_TABLES + ANALYTICS_TABLES + STATE_TABLES + LOG_TABLES}


def test_spark_and_arrow_schemas_agree(spark):
    """Spark reads the tables with each one's DDL (Table.ddl): its types and comments are Arrow's."""
    from pyspark.sql.pandas.types import to_arrow_type
    for table in RAW_TABLES + ANALYTICS_TABLES + STATE_TABLES + LOG_TABLES:
        schema, arrow = spark.createDataFrame([], table.ddl(comments=True)).schema, table.arrow()
        assert schema.names == arrow.names == table.names
        for field, column in zip(schema.fields, table.columns):
            expected = to_arrow_type(field.dataType, timezone="UTC")
            assert arrow.field(field.name).type.equals(expected) or (
                pa.types.is_map(expected) and pa.types.is_map(arrow.field(field.name).type)), field.name
            assert field.metadata.get("comment") == column.comment, field.name