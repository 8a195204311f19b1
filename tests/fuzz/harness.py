"""How the fuzz tests run: their budget, the guard around each example, and where failing inputs go.

Budget (see tests/fuzz/__init__.py for the whole story):
- default (CI): every fuzz test runs a fixed number of derandomized examples, the same ones on
  every run; the `[smoke]` variant of each runs an eighth of them and is not marked slow.
- `AMQPCAP_FUZZ_SECONDS=N`: N seconds for the whole suite, split between the tests by their
  `share`; each test keeps starting fresh randomized hypothesis runs until its share is spent,
  with a hypothesis database under .hypothesis/fuzz so a failure found once is replayed first.

The guard (`example`): each example runs under a SIGALRM timer (AMQPCAP_FUZZ_EXAMPLE_SECONDS,
default 10 s, far above the milliseconds an example takes) and, every AMQPCAP_FUZZ_MEMORY_EVERY-th
example (default 5: tracemalloc slows the decoder five times), a tracemalloc peak bound relative
to the input size. A failing input is written to AMQPCAP_FUZZ_ARTIFACTS (default .fuzz-artifacts/
at the project root) and its path is in the failure message; a tiny one belongs in
tests/fuzz/corpus/ (see test_corpus.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context, currently_in_test_context, note
from hypothesis.database import DirectoryBasedExampleDatabase

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("AMQPCAP_FUZZ_ARTIFACTS", ROOT / ".fuzz-artifacts"))
SECONDS = float(os.environ["AMQPCAP_FUZZ_SECONDS"]) if os.environ.get("AMQPCAP_FUZZ_SECONDS") else None
EXAMPLE_SECONDS = float(os.environ.get("AMQPCAP_FUZZ_EXAMPLE_SECONDS", "10"))
MEMORY_EVERY = max(1, int(os.environ.get("AMQPCAP_FUZZ_MEMORY_EVERY", "5")))
SMOKE_FRACTION = 8  # the [smoke] variant runs 1/8 of a test's CI examples

# A decoder may hold a read window (1 MiB), a boundary search's lookahead (about 2 MiB) and a few
# copies of its input: far below this. A leak or a size field trusted for an allocation is not.
MEMORY_BASE = 48 << 20
MEMORY_PER_INPUT_BYTE = 32

TIERS = [pytest.param("smoke", id="smoke"), pytest.param("full", id="full", marks=pytest.mark.slow)]

_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much, HealthCheck.large_base_example])


class ExampleTimeout(Exception):
    """An example ran past its time limit (a hang)."""


class ExampleMemory(AssertionError):
    """An example's allocations peaked above its bound."""


def run(check, tier: str, examples: int, share: float) -> None:
    """Run `check(data)` (data: hypothesis's st.data()) under the budget of `tier`.

    `examples`: the CI example count; `share`: this test's part of AMQPCAP_FUZZ_SECONDS."""
    if SECONDS is not None:
        if tier == "smoke":
            pytest.skip("AMQPCAP_FUZZ_SECONDS is set: the [full] variant fuzzes for the time given")
        database = DirectoryBasedExampleDatabase(str(ROOT / ".hypothesis" / "fuzz"))
        stop = time.monotonic() + SECONDS * share
        rounds = 0
        while time.monotonic() < stop or not rounds:
            _build(check, max_examples=max(examples, 200), derandomize=False, database=database)()
            rounds += 1
        return
    count = examples if tier == "full" else max(10, examples // SMOKE_FRACTION)
    _build(check, max_examples=count, derandomize=True, database=None)()


def _build(check, **options):
    def test(data):
        check(data)
    test.__name__ = test.__qualname__ = check.__name__
    test._hypothesis_internal_add_digest = check.__qualname__.encode()
    return settings(**_COMMON, **options)(given(st.data())(test))


# -- the guard ---------------------------------------------------------------------------------

_examples = 0


def _final() -> bool:
    """Whether this is the run hypothesis reports (not one of its shrinking attempts)."""
    if not currently_in_test_context():
        return True
    return current_build_context().is_final


def save(name: str, data: bytes, suffix: str = ".bin") -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}-{hashlib.sha1(data).hexdigest()[:12]}{suffix}"
    path.write_bytes(data)
    return path


@contextlib.contextmanager
def example(name: str, data: bytes, suffix: str = ".bin", seconds: float | None = None, trace: bool | None = None):
    """Run the body as one fuzz example on input `data`: a time limit, a memory bound (sampled;
    `trace` forces it on or off), and the input saved if the body fails."""
    global _examples
    _examples += 1
    limit = EXAMPLE_SECONDS if seconds is None else seconds
    fired = []

    def expire(*_):
        if not fired:
            fired.append(save(name, data, suffix))
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # again, should something swallow the exception
        raise ExampleTimeout(f"{name}: an example ran past {limit:g} s (a hang?); input saved at {fired[0]}")

    traced = (_examples % MEMORY_EVERY == 0 if trace is None else trace) and not tracemalloc.is_tracing()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    if traced:
        tracemalloc.start()
    try:
        yield
        if traced:
            peak = tracemalloc.get_traced_memory()[1]
            bound = MEMORY_BASE + MEMORY_PER_INPUT_BYTE * len(data)
            if peak > bound:
                path = save(name, data, suffix)
                raise ExampleMemory(f"{name}: allocations peaked at {peak} bytes for a {len(data)}-byte input "
                                    f"(bound {bound}); input saved at {path}")
    except ExampleTimeout:
        raise
    except BaseException:
        if _final():
            path = save(name, data, suffix)
            if currently_in_test_context():
                note(f"input saved at {path}")
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if traced:
            tracemalloc.stop()
