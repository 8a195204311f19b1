"""Arrow in a worker without pandas.

`pa.array(list)` first asks whether the list is a pandas object, and pyarrow answers by importing
pandas (when it is installed, as PySpark's extras install it): measured 0.23-0.44 s and 56 MB of
every Python worker, for a question whose answer our tasks know (they pass lists, never pandas).
`answer_without_pandas()` makes pyarrow ask once with pandas out of reach, so that it remembers
"no pandas" for the lenient probes only: an explicit pandas call (`to_pandas`, `from_pandas`)
still imports pandas and works, as pyarrow retries the import for those. Done in our own tasks
only, not in a worker that may also run someone else's pandas code; a process that has already
imported pandas is left as it is (nothing to save).
"""

from __future__ import annotations

import importlib.abc
import sys

import pyarrow as pa


class _PandasOutOfReach(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is out of reach while pyarrow probes for it")
        return None


def answer_without_pandas() -> bool:
    """Whether pyarrow's pandas probe was answered here without importing pandas."""
    shim = getattr(pa.lib, "_pandas_api", None)
    if shim is None or "pandas" in sys.modules:
        return False
    finder = _PandasOutOfReach()
    sys.meta_path.insert(0, finder)
    try:
        return not shim.have_pandas  # the probe: answered now, and remembered
    except Exception:  # a pyarrow whose shim works otherwise: its probe stays as it was
        return False
    finally:
        sys.meta_path.remove(finder)
