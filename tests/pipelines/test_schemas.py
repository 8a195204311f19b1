from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from pipelines.schemas import RAW_TABLES, markdown
from tests.conftest import ROOT


def test_docs_tables_md_is_generated_from_the_schemas():
    generated = subprocess.run([sys.executable, "-m", "pipelines.schemas"], capture_output=True,
                               text=True, check=True, cwd=ROOT).stdout
    assert (ROOT / "docs" / "tables.md").read_text() == generated == markdown()


def test_every_column_is_commented_once_with_one_type():
    for table in RAW_TABLES:
        assert len(set(table.names)) == len(table.names), table.name
        assert all(c.comment for c in table.columns)
        assert table.names[0] == "date"


def test_spark_and_arrow_schemas_agree():
    from pyspark.sql.pandas.types import to_arrow_type
    for table in RAW_TABLES:
        spark, arrow = table.spark(), table.arrow()
        assert spark.names == arrow.names == table.names
        for field in spark.fields:
            expected = to_arrow_type(field.dataType, timezone="UTC")
            assert arrow.field(field.name).type.equals(expected) or (
                pa.types.is_map(expected) and pa.types.is_map(arrow.field(field.name).type)), field.name
        assert table.ddl().count("COMMENT") == len(table.columns)


def test_engine_choice():
    from pipelines.lake import EngineError, choose_engine
    assert choose_engine("auto", loaded=False) == "delta-rs"
    assert choose_engine("auto", loaded=True) == "delta-spark"
    assert choose_engine("delta-rs", loaded=True) == "delta-rs"
    with pytest.raises(EngineError, match="Delta jars are not on Spark's classpath"):
        choose_engine("delta-spark", loaded=False)
