"""The package's build: pure Python (pyproject.toml says what), plus the hot modules compiled when
possible (see amqp_decode.HOT_MODULES)."""

from setuptools import setup

setup()
