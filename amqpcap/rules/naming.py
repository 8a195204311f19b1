"""Names the analytics tables give to protocol numbers, taken from the connection's spec: reply
codes (NOT_FOUND, soft-error...), methods by (class id, method id), and which replies answer each
synchronous request."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from amqpcap.protocol.spec import Spec, load_spec


@dataclass(frozen=True)
class Naming:
    reply_codes: dict[int, tuple[str, str]]  # code -> (REPLY_NAME, soft-error | hard-error)
    methods: dict[tuple[int, int], str]  # (class id, method id) -> 'queue.declare'
    responses: dict[str, tuple[str, ...]]  # request -> the replies that answer it
    replies: frozenset[str]  # every method that answers some request

    def method_name(self, class_id: int | None, method_id: int | None) -> str | None:
        return self.methods.get((class_id, method_id))


@functools.lru_cache(maxsize=8)
def naming(spec: Spec) -> Naming:
    codes = {c.value: (c.name.upper().replace("-", "_"), c.error_class)
             for c in spec.constants.values() if c.error_class}
    methods = {(m.class_id, m.method_id): m.full_name for m in spec.methods()}
    responses = {m.full_name: tuple(f"{m.class_name}.{r}" for r in m.responses)
                 for m in spec.methods() if m.responses}
    return Naming(codes, methods, responses, frozenset(r for rs in responses.values() for r in rs))


def naming_for(version: str | None) -> Naming:
    """The bundled spec of a protocol version ('0-9-1' when unknown or not bundled)."""
    try:
        return naming(load_spec(version or "0-9-1"))
    except Exception:  # a version without a bundled spec: name things as 0-9-1 does
        return naming(load_spec("0-9-1"))
