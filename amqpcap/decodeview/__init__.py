"""The views of `amqpcap decode`: records filtered (`filters`, `where`), put in time order
(`order`), connections' ends followed (`ends`), rendered as readable lines (`readable`) or as JSON
Lines (`jsonl`). Its hot modules run compiled (Cython) where the package was built with a C
compiler, as amqp_decode's do, and as the same .py files under AMQPCAP_INTERPRETED=1."""

import os as _os

import amqp_decode as _amqp_decode

# The modules setup.py compiles (typed by their .pxd where they have one, the others as they are).
HOT_MODULES = ("readable", "order", "ends", "filters", "jsonl")


def build() -> str:
    return _amqp_decode.build_of(__name__, HOT_MODULES)


if _os.environ.get("AMQPCAP_INTERPRETED"):
    _amqp_decode.prefer_sources(__name__, HOT_MODULES)
