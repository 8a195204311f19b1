"""What our processes set up for themselves, once: the command, the embedded driver and every task
in a Python worker (Spark-free: `amqpcap decode` needs it too, and imports no Spark).

**Fewer garbage collections while decoding.** The decoder makes millions of short-lived dicts and
keeps thousands of long-lived ones (open connections, rows waiting to be written); with Python's
default thresholds the cyclic collector then rescans the long-lived ones over and over (about a tenth
of a decode task's time, measured with py-spy). Objects made before decoding starts are frozen out
of the collector's view, and collections of the young generation are spaced out, the old ones
almost never: so what decoding makes must not rely on the collector to be freed (an ended connection
breaks its cycles, amqpcap.capture.tcp.TcpConnection.end). What is left in cycles when decoding ends (a
task's decoder and writers) is collected then, not left to a later task of a reused worker.

In a task's Python worker, once per process (`prepare_worker`):

**pyarrow without pandas.** `pa.array(list)` first asks whether the list is a pandas object, and
pyarrow answers by importing pandas (when it is installed, as PySpark's extras install it): measured
0.23-0.44 s and 56 MB of every Python worker, for a question whose answer our tasks know (they pass
lists, never pandas). pyarrow is made to ask once with pandas out of reach, so that it remembers
"no pandas" for its lenient probes only: an explicit pandas call (`to_pandas`, `from_pandas`) still
imports pandas and works, as pyarrow retries the import for those. A process that has already
imported pandas is left as it is (nothing to save). The probe spares conversions given their type
only: one that infers a Python value's type (`pa.array(list)` or `pa.scalar(value)` with no type)
imports pandas in Arrow's C++ whatever the probe said, so our tasks name the type of every one.

**A steady heap.** Arrow's buffers come from the system allocator rather than Arrow's own
(mimalloc kept what it freed: peak 253 -> 234 MB at 0.5 GB in bench/worker_memory.py). glibc's
thresholds are fixed at HEAP_THRESHOLD: blocks up to that size come from the heap, and up to that
much freed memory stays there for reuse. A task's big blocks (the capture reader's 1 MB reads,
Arrow's growing column buffers) come and go all the time; from fresh mappings, every byte of them
is a page fault. Reading one 596 MB file: 650,000 faults and 1.0-2.0 s of system time beside
1.0-1.3 s of user time (perf: Arrow's buffer copies, the reads), against 45,000-77,000 faults and
0.4-0.8 s with the heap kept, for 20 MB more at the peak. (An earlier trim threshold of 1 MB saved
25 MB of that peak for those faults; glibc's own thresholds, which grow as big blocks are freed,
left 105,000.)

Done in our own tasks only, not in a worker that may also run someone else's code first.

**One OpenBLAS thread.** numpy (which pyarrow imports) starts OpenBLAS with a thread per core, and
those threads spin for a while after import: ~0.06 s of CPU in every Python process that imports
it, taken from the tasks on a small machine, for linear algebra nothing here does. It must be set
before numpy is imported, so not here: the command sets it for itself, the local JVM and its workers
(`one_blas_thread`, first thing), and the session passes it to any cluster's workers. A user's own
value wins. (This module imports pyarrow only when a task prepares, so the command can call it.)
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

YOUNG_ALLOCATIONS = 500_000  # Python's default: 700; 50,000 still spent 1% of a decode task collecting
@contextlib.contextmanager
def fewer_collections(collect: bool = True):
    """`collect=False`: no collection at the end, for a process that ends right after (`amqpcap
    decode`): a full pass over everything it made only delayed the exit (10-16 ms measured). Called
    in a process that goes on (decode's main in a test), what is left in cycles then waits for the
    collector's next pass at the restored thresholds."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_ALLOCATIONS, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if collect:  # (before unfreezing: a pass over what decoding made, not also over every object
            gc.collect()  # the process held before it, which cost ~12 ms per decode task)
        gc.unfreeze()


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
HEAP_THRESHOLD = 32 << 20
SINGLE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}

_prepared = False


def prepare_worker() -> None:
    """The settings above, in this process (once)."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    import pyarrow as pa
    answer_without_pandas()
    pa.set_memory_pool(pa.system_memory_pool())
    steady_heap()


def storage_environment(storage) -> dict[str, str]:
    """The environment the object stores' clients (pyarrow's, delta-rs's, boto3's) read an S3
    endpoint from, for the settings' `storage` section (amqpcap.settings.StorageSection): nothing
    when no endpoint is set. Never credentials: those stay in the chain that holds them."""
    endpoint = storage.s3_endpoint
    if not endpoint:
        return {}
    return {"AWS_ENDPOINT_URL": endpoint, **({"AWS_ALLOW_HTTP": "true"} if endpoint.startswith("http://") else {})}


def use_storage(storage) -> None:
    """This process (and the processes it starts: Spark's JVM, its Python workers) reach the
    object store the settings name."""
    os.environ.update(storage_environment(storage))


def one_blas_thread() -> None:
    """SINGLE_BLAS_THREAD in this process's environment (and its children's), unless set already."""
    for name, value in SINGLE_BLAS_THREAD.items():
        os.environ.setdefault(name, value)


class _PandasOutOfReach:
    """A finder on sys.meta_path (it needs only find_spec; importlib.abc, its base class, would
    cost every `amqpcap` start the import of importlib.resources)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is out of reach while pyarrow probes for it")
        return None


def answer_without_pandas() -> bool:
    """Whether pyarrow's pandas probe was answered here without importing pandas."""
    import pyarrow as pa
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


def steady_heap() -> bool:
    """glibc's mmap and trim thresholds fixed at HEAP_THRESHOLD (False where the C library is not glibc)."""
    # (imported here: every command imports this module for one_blas_thread, and ctypes.util costs ~7 ms)
    import ctypes
    import ctypes.util
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return False
    if not hasattr(libc, "mallopt"):
        return False
    return all([libc.mallopt(M_MMAP_THRESHOLD, HEAP_THRESHOLD), libc.mallopt(M_TRIM_THRESHOLD, HEAP_THRESHOLD)])
