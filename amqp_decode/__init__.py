"""Spec-driven AMQP 0-9-1 / 0-9 decoding, from capture files to frames. Pure Python: no Spark here."""

__version__ = "0.1.0"
