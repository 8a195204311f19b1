"""What our tasks set up in the Python worker process that runs them, once per process.

**pyarrow without pandas.** `pa.array(list)` first asks whether the list is a pandas object, and
pyarrow answers by importing pandas (when it is installed, as PySpark's extras install it): measured
0.23-0.44 s and 56 MB of every Python worker, for a question whose answer our tasks know (they pass
lists, never pandas). pyarrow is made to ask once with pandas out of reach, so that it remembers
"no pandas" for its lenient probes only: an explicit pandas call (`to_pandas`, `from_pandas`) still
imports pandas and works, as pyarrow retries the import for those. A process that has already
imported pandas is left as it is (nothing to save).

**Memory given back.** Arrow's buffers come from the system allocator rather than Arrow's own
(mimalloc keeps what it freed for reuse), and glibc returns freed memory above 1 MB instead of
adjusting its thresholds upwards as big buffers come and go. Measured with bench/worker_memory.py
(a worker's read, decode and message_flows tasks): peak 253 -> 223 MB at 0.5 GB, 299 -> 256 MB at
2 GB, the same CPU time.

Done in our own tasks only, not in a worker that may also run someone else's code first.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.abc
import sys

import pyarrow as pa

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter
TRIM_THRESHOLD = 1 << 20

_prepared = False


def prepare_worker() -> None:
    """The settings above, in this process (once)."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    answer_without_pandas()
    pa.set_memory_pool(pa.system_memory_pool())
    give_back_freed_memory()


class _PandasOutOfReach(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
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


def give_back_freed_memory() -> bool:
    """glibc's trim threshold fixed at TRIM_THRESHOLD (False where the C library is not glibc)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) if hasattr(libc, "mallopt") else False
    except OSError:
        return False
