"""The fuzz harness's own guard: a hang and a memory blow-up fail the example, with the input saved."""

from __future__ import annotations

import pytest

from tests.fuzz import harness


def test_a_hang_fails_with_the_input_saved(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "ARTIFACTS", tmp_path)
    with pytest.raises(harness.ExampleTimeout, match="input saved at"):
        with harness.example("hang", b"the input", seconds=0.2):
            while True:
                pass
    assert [p.read_bytes() for p in tmp_path.iterdir()] == [b"the input"]


def test_a_hang_that_swallows_the_exception_still_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "ARTIFACTS", tmp_path)
    with pytest.raises(harness.ExampleTimeout):
        with harness.example("hang", b"x", seconds=0.2):
            for _ in range(3):
                try:
                    while True:
                        pass
                except Exception:  # a decoder catching everything once or twice
                    continue
            while True:
                pass


def test_memory_beyond_the_bound_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "ARTIFACTS", tmp_path)
    with pytest.raises(harness.ExampleMemory, match="input saved at"):
        with harness.example("memory", b"tiny", trace=True):
            hog = bytearray(harness.MEMORY_BASE + (1 << 20))
            del hog
    with harness.example("memory", b"tiny", trace=True):
        small = bytearray(1 << 20)
        del small
