"""The notebooks run top to bottom on the samples' lake, and are committed without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.parametrize("name", ["spark_tour.ipynb", "duckdb_polars.ipynb"])
def test_committed_without_outputs(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["spark_tour.ipynb", "duckdb_polars.ipynb"])
def test_runs_on_the_samples_lake(name, lake, monkeypatch):
    from nbclient import NotebookClient
    monkeypatch.setenv("AMQPCAP_LAKE", lake[0])
    # the kernel's own Spark beside the suite's: small
    monkeypatch.setenv("AMQPCAP_SPARK_MASTER", "local[1]")
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
                   ).execute()  # raises CellExecutionError on any failing cell
    results = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs
               if o.output_type == "execute_result"]
    assert len(results) >= 8  # every question answered with a table
    assert not [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
