"""Load AMQP protocol definitions from the official XML format.

Everything the decoder knows about the protocol (ids, names, field order and types, who sends a
method, which reply answers it, content properties, reply codes) comes from these files. The
bundled ones live in `spec/`; any file in the same format can be loaded instead, prose included
(`doc`, `rule`, labels and comments are ignored).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from amqpcap.protocol import spec_cache
from amqpcap.protocol.errors import SpecError

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

WIRE_TYPES = frozenset({"bit", "octet", "short", "long", "longlong", "shortstr", "longstr",
                        "timestamp", "table", "content"})

BUNDLED = {"0-9-1": "amqp0-9-1.xml", "0-9": "amqp0-9.xml"}

# Directions as the project writes them: who sent the frame.
CLIENT_TO_SERVER = "C>S"
SERVER_TO_CLIENT = "S>C"


def snake(name: str) -> str:
    return name.replace("-", "_")


# The spec's shapes are msgspec Structs, not dataclasses: a dataclass is made at import by compiling
# its methods (~0.5 ms each, paid by every `amqpcap` start), a Struct's in C (~20 us).


class Field(msgspec.Struct, frozen=True):
    name: str  # as the spec spells it: "delivery-tag"
    key: str  # as decoded arguments are keyed: "delivery_tag"
    type: str  # wire type, resolved through domains
    domain: str | None
    reserved: bool


class Method(msgspec.Struct, frozen=True, eq=False, dict=True):  # (dict: for its cached properties)
    class_id: int
    method_id: int
    class_name: str
    name: str
    fields: tuple[Field, ...]
    synchronous: bool
    content: bool
    deprecated: bool
    responses: tuple[str, ...]
    # The XML names the peer that must implement (receive) the method: "server" means C>S.
    receivers: frozenset[str]

    @functools.cached_property  # read for every decoded frame
    def full_name(self) -> str:
        return f"{self.class_name}.{self.name}"

    def __repr__(self) -> str:
        return f"<Method {self.full_name} {self.class_id}/{self.method_id}>"

    @functools.cached_property
    def directions(self) -> frozenset[str]:
        return frozenset({CLIENT_TO_SERVER if r == "server" else SERVER_TO_CLIENT
                          for r in self.receivers})

    @property
    def is_request(self) -> bool:
        return bool(self.responses)


class AmqpClass(msgspec.Struct, frozen=True, eq=False):
    class_id: int
    name: str
    handler: str | None
    properties: tuple[Field, ...]  # content properties, in flag order
    methods: dict[int, Method]

    def method_named(self, name: str) -> Method:
        for method in self.methods.values():
            if method.name == name:
                return method
        raise KeyError(f"{self.name}.{name}")


class Constant(msgspec.Struct, frozen=True):
    name: str
    value: int
    error_class: str | None  # "soft-error" (channel), "hard-error" (connection) or None


class Spec(msgspec.Struct, frozen=True, eq=False):
    major: int
    minor: int
    revision: int
    port: int | None
    comment: str
    source: str
    constants: dict[str, Constant]
    domains: dict[str, str]
    classes: dict[int, AmqpClass]
    _by_name: dict[str, Method]
    _codes: dict[int, Constant]

    @property
    def version(self) -> str:
        parts = [self.major, self.minor] + ([self.revision] if self.revision else [])
        return "-".join(str(p) for p in parts)

    def constant(self, name: str) -> int:
        return self.constants[name].value

    def method(self, class_id: int, method_id: int) -> Method | None:
        amqp_class = self.classes.get(class_id)
        return None if amqp_class is None else amqp_class.methods.get(method_id)

    def method_named(self, full_name: str) -> Method:
        return self._by_name[full_name]

    def methods(self) -> list[Method]:
        return [m for c in self.classes.values() for m in c.methods.values()]

    def reply_code(self, code: int) -> Constant | None:
        """The constant a reply code stands for (NOT_FOUND...), None for codes the spec lacks."""
        return self._codes.get(code)


def _attr(element: ET.Element, name: str, where: str) -> str:
    value = element.get(name)
    if value is None:
        raise SpecError(f"{where}: <{element.tag}> has no '{name}' attribute")
    return value.strip()


def _int(element: ET.Element, name: str, where: str) -> int:
    text = _attr(element, name, where)
    try:
        return int(text, 0)
    except ValueError:
        raise SpecError(f"{where}: <{element.tag} {name}={text!r}> is not an integer") from None


def _flag(element: ET.Element, name: str) -> bool:
    return (element.get(name) or "0").strip() == "1"


def _resolve(domains: dict[str, str], name: str, where: str) -> str:
    seen = []
    while name not in WIRE_TYPES:
        if name in seen or name not in domains:
            raise SpecError(f"{where}: domain or type {name!r} does not resolve to a wire type")
        seen.append(name)
        name = domains[name]
    return name


def _field(element: ET.Element, domains: dict[str, str], where: str) -> Field:
    name = _attr(element, "name", where)
    domain = element.get("domain")
    declared = domain or element.get("type")
    if declared is None:
        raise SpecError(f"{where}: field {name!r} has neither domain nor type")
    return Field(name=name, key=snake(name), type=_resolve(domains, declared, f"{where}.{name}"),
                 domain=domain, reserved=_flag(element, "reserved"))


def parse_spec(text: str | bytes, source: str = "<string>") -> Spec:
    import xml.etree.ElementTree as ET  # (only here: a spec read before comes from spec_cache)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise SpecError(f"{source}: not well-formed XML ({error})") from None
    if root.tag != "amqp":
        raise SpecError(f"{source}: root element is <{root.tag}>, expected <amqp>")

    constants: dict[str, Constant] = {}
    for element in root.findall("constant"):
        constant = Constant(_attr(element, "name", source), _int(element, "value", source),
                            element.get("class"))
        constants[constant.name] = constant
    domains = {_attr(d, "name", source): _attr(d, "type", source) for d in root.findall("domain")}

    classes: dict[int, AmqpClass] = {}
    for class_element in root.findall("class"):
        class_name = _attr(class_element, "name", source)
        class_id = _int(class_element, "index", f"{source}: class {class_name}")
        where = f"{source}: {class_name}"
        if class_id in classes:
            raise SpecError(f"{where}: class id {class_id} is already {classes[class_id].name}")
        properties = tuple(_field(f, domains, where) for f in class_element.findall("field"))
        methods: dict[int, Method] = {}
        for method_element in class_element.findall("method"):
            name = _attr(method_element, "name", where)
            method_id = _int(method_element, "index", f"{where}.{name}")
            if method_id in methods:
                raise SpecError(f"{where}.{name}: method id {method_id} is already "
                                f"{methods[method_id].name}")
            methods[method_id] = Method(
                class_id=class_id, method_id=method_id, class_name=class_name, name=name,
                fields=tuple(_field(f, domains, f"{where}.{name}")
                             for f in method_element.findall("field")),
                synchronous=_flag(method_element, "synchronous"),
                content=_flag(method_element, "content"),
                deprecated=_flag(method_element, "deprecated"),
                responses=tuple(_attr(r, "name", where) for r in method_element.findall("response")),
                receivers=frozenset(_attr(c, "name", where)
                                    for c in method_element.findall("chassis")),
            )
        classes[class_id] = AmqpClass(class_id, class_name, class_element.get("handler"),
                                      properties, methods)

    port = root.get("port")
    return _spec(_int(root, "major", source), _int(root, "minor", source), int(root.get("revision") or 0),
                 int(port) if port else None, root.get("comment") or "", source, constants, domains, classes)


def _spec(major: int, minor: int, revision: int, port: int | None, comment: str, source: str,
          constants: dict[str, Constant], domains: dict[str, str], classes: dict[int, AmqpClass]) -> Spec:
    """A Spec of what its XML says, with what is derived from it."""
    by_name = {method.full_name: method for amqp_class in classes.values() for method in amqp_class.methods.values()}
    codes = {c.value: c for c in constants.values() if c.error_class or c.name == "reply-success"}
    return Spec(major=major, minor=minor, revision=revision, port=port, comment=comment, source=source,
                constants=constants, domains=domains, classes=classes, _by_name=by_name, _codes=codes)


# A spec's plain form (spec_cache keeps it): what its XML says, as tuples of str, int, bool and None
# in the XML's order, nothing derived; its first item names its layout.
_PLAIN = 1


def _plain_field(f: Field) -> tuple:
    return (f.name, f.key, f.type, f.domain, f.reserved)


def to_plain(spec: Spec) -> tuple:
    return (_PLAIN, spec.major, spec.minor, spec.revision, spec.port, spec.comment,
            tuple((c.name, c.value, c.error_class) for c in spec.constants.values()),
            tuple(spec.domains.items()),
            tuple((c.class_id, c.name, c.handler, tuple(_plain_field(f) for f in c.properties),
                   tuple((m.method_id, m.name, tuple(_plain_field(f) for f in m.fields), m.synchronous, m.content,
                          m.deprecated, m.responses, tuple(sorted(m.receivers))) for m in c.methods.values()))
                  for c in spec.classes.values()))


def from_plain(plain: tuple, source: str) -> Spec:
    """The Spec of a plain form (ValueError for another layout)."""
    if type(plain) is not tuple or not plain or plain[0] != _PLAIN:
        raise ValueError("not a spec's plain form of this layout")
    _, major, minor, revision, port, comment, constants, domains, classes = plain
    built: dict[int, AmqpClass] = {}
    for class_id, class_name, handler, properties, methods in classes:
        built[class_id] = AmqpClass(class_id, class_name, handler, tuple(Field(*f) for f in properties), {
            method_id: Method(class_id, method_id, class_name, name, tuple(Field(*f) for f in fields), synchronous,
                              content, deprecated, responses, frozenset(receivers))
            for method_id, name, fields, synchronous, content, deprecated, responses, receivers in methods})
    return _spec(major, minor, revision, port, comment, source, {c[0]: Constant(*c) for c in constants},
                 dict(domains), built)


@functools.lru_cache(maxsize=None)
def load_spec(name_or_path: str = "0-9-1") -> Spec:
    """A bundled spec by version ("0-9-1", "0-9") or any spec file by path; cached per process."""
    if name_or_path in BUNDLED:
        data, source = _bundled_bytes(BUNDLED[name_or_path]), f"spec/{BUNDLED[name_or_path]}"
    else:
        path = Path(name_or_path)
        try:
            data = path.read_bytes()
        except OSError as error:
            raise SpecError(f"cannot read spec file {path}: {error.strerror}") from None
        source = str(path)
    plain = spec_cache.load(data)
    if plain is not None:
        try:
            return from_plain(plain, source)
        except (ValueError, TypeError):  # another layout (or damage marshal let through): parsed again
            pass
    spec = parse_spec(data, source)
    spec_cache.store(data, to_plain(spec))
    return spec


def _bundled_bytes(name: str) -> bytes:
    """A bundled spec file: installed, in the package amqpcap.protocol.specs beside this module; in a
    source checkout (an editable install), in spec/ at its root. (Found by path, not through
    importlib.resources, whose import costs every `amqpcap` start several milliseconds.)"""
    here = os.path.dirname(os.path.abspath(__file__))
    for folder in (os.path.join(here, "specs"), os.path.join(os.path.dirname(os.path.dirname(here)), "spec")):
        try:
            with open(os.path.join(folder, name), "rb") as file:
                return file.read()
        except FileNotFoundError:
            continue
    from importlib import resources  # (anything else a packaging tool may do)
    return (resources.files("amqpcap.protocol.specs") / name).read_bytes()
