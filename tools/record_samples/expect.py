"""What a scenario knows by construction, written out as <scenario>.expected.json."""
from __future__ import annotations

import json
from collections import Counter

MESSAGE_KEYS = ["published", "delivered", "get_ok", "get_empty", "acked", "acked_multiple_frames",
                "nacked", "rejected", "requeued", "redelivered", "returned", "confirm_acks",
                "confirm_nacks", "confirmed_messages", "max_body_size"]


class Expect:
    def __init__(self, scenario: str, description: str):
        self.scenario, self.description = scenario, description
        self.capture = {"file": "", "format": "pcap", "link_types": [], "timestamp_resolution": "us",
                        "starts_mid_stream": False}
        self.clients: list[str] = []
        self.broker = ""
        self.auth_mechanisms: list[str] = []
        self.users: list[str] = []
        self.connections = 0
        self.ip_versions: set[int] = set()
        self.channels_opened = 0
        self.methods = {"C>S": Counter(), "S>C": Counter()}
        self.messages = dict.fromkeys(MESSAGE_KEYS, 0)
        self.reply_codes = {"connection.close": [], "channel.close": [], "basic.return": []}
        self.heartbeats_min = {"C>S": 0, "S>C": 0}
        self.not_decodable = {"C>S": Counter(), "S>C": Counter()}
        self.notes: list[str] = []
        self.cuts: list[dict] | None = None  # long_connection only: record indices to split the capture at
        self.journeys: list[dict] | None = None   # hops.py: each message_id's publishes and deliveries in order
        self.protocols: list[dict] | None = None  # protocols.py: the protocol each TCP connection speaks
        self.tls: list[dict] | None = None        # tls.py: each TCP connection's TLS facts and methods
        self.broker_config: dict | None = None    # findings.py: the rabbitmq.conf / advanced.config the node ran with
        self.facts: dict | None = None            # findings.py: names, counts, timings, the broker's replies

    # ---- methods
    def c(self, name: str, n: int = 1):
        self.methods["C>S"][name] += n

    def s(self, name: str, n: int = 1):
        self.methods["S>C"][name] += n

    def malformed(self, direction: str, name: str, n: int = 1):
        """A method sent malformed on purpose (e.g. a bad frame-end): the broker sees it, a
        conforming decoder reports an issue instead of decoding it."""
        self.not_decodable[direction][name] += n

    def rpc(self, name: str, n: int = 1, reply: str | None = None, code: int | None = None):
        """Client sends `name`, broker answers `name`-ok (or `reply`).
        code: the reply-code the client puts in a channel.close / connection.close."""
        self.c(name, n)
        self.s(reply or name + "-ok", n)
        if code is not None:
            self.reply_codes[name] += [code] * n

    # ---- bookkeeping helpers for library clients (the raw client calls these itself)
    def client(self, label: str):
        if label not in self.clients:
            self.clients.append(label)

    def connection(self, label: str, ip: int = 4):
        self.client(label)
        self.connections += 1
        self.ip_versions.add(ip)

    def auth(self, mechanism: str, user: str):
        if mechanism not in self.auth_mechanisms:
            self.auth_mechanisms.append(mechanism)
        if user not in self.users:
            self.users.append(user)

    def lib_connect(self, label: str, user: str, mechanism: str = "PLAIN", ip: int = 4):
        """A library client's normal handshake: start/start-ok, tune/tune-ok, open/open-ok."""
        self.connection(label, ip)
        self.auth(mechanism, user)
        self.s("connection.start"); self.c("connection.start-ok")
        self.s("connection.tune"); self.c("connection.tune-ok")
        self.rpc("connection.open")

    def lib_close(self, code: int = 200):
        self.rpc("connection.close", code=code)

    def lib_channel(self, n: int = 1):
        self.rpc("channel.open", n)
        self.channels_opened += n

    def reply_code(self, method: str, code: int):
        self.reply_codes[method].append(code)

    def msg(self, key: str, n: int = 1):
        self.messages[key] += n

    def max_body(self, size: int):
        self.messages["max_body_size"] = max(self.messages["max_body_size"], size)

    def heartbeat(self, direction: str, n: int = 1):
        self.heartbeats_min[direction] += n

    def note(self, text: str):
        self.notes.append(text)

    # ---- output
    def to_dict(self) -> dict:
        return {
            "scenario": self.scenario,
            "description": self.description,
            "capture": self.capture,
            "clients": self.clients,
            "broker": self.broker,
            "auth_mechanisms": self.auth_mechanisms,
            "users": self.users,
            "connections": self.connections,
            "ip_versions": sorted(self.ip_versions),
            "channels_opened": self.channels_opened,
            "methods": {d: dict(sorted((k, v) for k, v in c.items() if v)) for d, c in self.methods.items()},
            "messages": self.messages,
            "reply_codes": self.reply_codes,
            "heartbeats_min": self.heartbeats_min,
            "not_decodable": {d: dict(c) for d, c in self.not_decodable.items() if c},
            "notes": " ".join(self.notes),
        } | {k: v for k, v in (("cuts", self.cuts), ("journeys", self.journeys),
                                ("protocols", self.protocols), ("tls", self.tls),
                                ("broker_config", self.broker_config), ("facts", self.facts)) if v is not None}

    def write(self, path):
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=2)
            f.write("\n")
