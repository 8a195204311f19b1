"""What both atheris harnesses share: a seed corpus in a temporary directory when the command line
names none, then libFuzzer's loop."""

from __future__ import annotations

import os
import tempfile
from typing import Callable, Iterable


def fuzz(argv: list[str], test_one_input: Callable[[bytes], None], name: str,
         seeds: Callable[[], Iterable[tuple[str, bytes]]]) -> None:
    """Run libFuzzer on `test_one_input` with `argv` (libFuzzer's flags and corpus directories);
    without a directory, from `seeds()` ((file name, input) pairs) written to a new one."""
    import atheris
    if not any(not a.startswith("-") for a in argv[1:]):
        directory = tempfile.mkdtemp(prefix=f"amqpcap-atheris-{name}-")
        for file_name, data in seeds():
            with open(os.path.join(directory, file_name), "wb") as f:
                f.write(data)
        argv = argv + [directory]
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
