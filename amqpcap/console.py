"""What amqpcap shows on the console: its own logging on stderr (Spark's and the JVM's only with
--verbose), and progress while a job runs."""

from __future__ import annotations

import logging
import sys


def setup_logging(level: str = "INFO", verbose: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("amqpcap: %(message)s"))
    logger = logging.getLogger("amqpcap")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
    # py4j logs every gateway call at INFO/DEBUG; Spark's JVM logs go through log4j (quiet unless
    # --verbose, see pipelines.session)
    logging.getLogger("py4j").setLevel(logging.DEBUG if verbose else logging.ERROR)
