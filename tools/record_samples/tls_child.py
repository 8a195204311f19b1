"""One TLS connection of tls.py in a process of its own, so that its OpenSSL reads the OPENSSL_CONF
the parent set (TLS 1.3 cipher suites, groups, encrypt-then-MAC off: things Python's ssl cannot set).
Run by tls.child_connection as: python -m tools.record_samples.tls_child '<spec as JSON>'; prints one
JSON line: the connection's sub-Expect (Expect.to_dict()) and its tls entry."""
from __future__ import annotations

import json
import sys

from .tls import pika_connection

if __name__ == "__main__":
    sub, entry = pika_connection(json.loads(sys.argv[1]))
    print(json.dumps({"sub": sub, "entry": entry}))
