"""Build spec/amqp0-9-1.xml from the official 0-9-1 XML and RabbitMQ's codegen JSON.

    python tools/make_spec.py [--shared ../shared] [--check]

The output keeps the structure of the official file (constants, domains, classes, methods, chassis,
responses, fields, asserts, content properties) and drops its prose (doc, rule, label, comments).
RabbitMQ's extensions are added from `amqp-rabbitmq-0.9.1.json`: their ids and fields come from the
JSON; who sends them and which reply answers them come from RabbitMQ's 0-9-1 reference (seed 002),
whose grammar is transcribed in EXTENSION_ROLES below because the JSON does not carry it.
`--check` exits non-zero when the committed file differs from what the sources give (drift test).
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "spec" / "amqp0-9-1.xml"
OFFICIAL_XML = "seeds/003_f593309a8c6e3f5a.txt"
RABBITMQ_JSON = "reference/rabbitmq-codegen/amqp-rabbitmq-0.9.1.json"

PROSE_ELEMENTS = {"doc", "rule", "grammar"}
PROSE_ATTRIBUTES = {"label"}

# Who receives each extension method ("server": sent C>S, "client": sent S>C) and its replies,
# from the grammars and method pages of RabbitMQ's 0-9-1 reference (seed 002).
EXTENSION_ROLES: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("connection", "blocked"): (("client",), ()),
    ("connection", "unblocked"): (("client",), ()),
    ("connection", "update-secret"): (("server",), ("update-secret-ok",)),
    ("connection", "update-secret-ok"): (("client",), ()),
    ("access", "request"): (("server",), ("request-ok",)),
    ("access", "request-ok"): (("client",), ()),
    ("exchange", "bind"): (("server",), ("bind-ok",)),
    ("exchange", "bind-ok"): (("client",), ()),
    ("exchange", "unbind"): (("server",), ("unbind-ok",)),
    ("exchange", "unbind-ok"): (("client",), ()),
    ("basic", "nack"): (("server", "client"), ()),
    ("confirm", "select"): (("server",), ("select-ok",)),
    ("confirm", "select-ok"): (("client",), ()),
}
# Standard methods RabbitMQ also sends the other way: confirms (basic.ack) and consumer cancel
# notifications (basic.cancel) travel S>C too.
EXTRA_CHASSIS = {("basic", "ack"): "client", ("basic", "cancel"): "client"}
# Fields seed 002 gives back their 0-9 meaning (the official 0-9-1 XML reserves them).
RESTORED_FIELDS = {("exchange", "declare", "reserved-2"): "auto-delete",
                   ("exchange", "declare", "reserved-3"): "internal"}
# The JSON spells a few 0-9-1 field names the 0-8 way.
JSON_FIELD_NAMES = {"nowait": "no-wait"}


def strip_prose(element: ET.Element) -> None:
    for child in list(element):
        if not isinstance(child.tag, str) or child.tag in PROSE_ELEMENTS:
            element.remove(child)
        else:
            strip_prose(child)
    for attribute in PROSE_ATTRIBUTES & set(element.attrib):
        del element.attrib[attribute]
    element.text = element.tail = None


def field_from_json(class_name: str, argument: dict, domains: set[str]) -> ET.Element:
    if argument["name"] == "ticket" and class_name != "access":
        # 0-9-1 keeps the old ticket slot as reserved-1 (access.request-ok's ticket is its value)
        return ET.Element("field", {"name": "reserved-1", "type": "short", "reserved": "1"})
    name = JSON_FIELD_NAMES.get(argument["name"], argument["name"])
    # A field named after a 0-9-1 domain (delivery-tag, no-wait...) uses it, as the official XML does.
    domain = name if name in domains else argument.get("domain") or argument["type"]
    return ET.Element("field", {"name": name, "domain": domain})


def method_from_json(class_name: str, method: dict, domains: set[str]) -> ET.Element:
    receivers, responses = EXTENSION_ROLES[(class_name, method["name"])]
    attributes = {"name": method["name"]}
    if method.get("synchronous") or responses or method["name"].endswith("-ok"):
        attributes["synchronous"] = "1"
    if method.get("content"):
        attributes["content"] = "1"
    attributes["index"] = str(method["id"])
    element = ET.Element("method", attributes)
    for receiver in receivers:
        ET.SubElement(element, "chassis", {"name": receiver, "implement": "MUST"})
    for response in responses:
        ET.SubElement(element, "response", {"name": response})
    element.extend(field_from_json(class_name, argument, domains) for argument in method["arguments"])
    return element


def build(shared: Path) -> ET.Element:
    root = ET.parse(shared / OFFICIAL_XML).getroot()
    strip_prose(root)
    rabbit = json.loads((shared / RABBITMQ_JSON).read_text())
    root.set("comment", "AMQ Protocol version 0-9-1 with RabbitMQ extensions")

    constants = {c.get("name") for c in root.findall("constant")}
    last_constant = root.findall("constant")[-1]
    for constant in rabbit["constants"]:
        name = constant["name"].lower()
        if name not in constants:
            attributes = {"name": name, "value": str(constant["value"])}
            if "class" in constant:
                attributes["class"] = constant["class"]
            position = list(root).index(last_constant) + 1
            root.insert(position, ET.Element("constant", attributes))

    domains = {d.get("name") for d in root.findall("domain")}
    classes = {c.get("name"): c for c in root.findall("class")}
    for rabbit_class in rabbit["classes"]:
        name = rabbit_class["name"]
        if name not in classes:
            element = ET.Element("class", {"name": name, "handler": "channel",
                                           "index": str(rabbit_class["id"])})
            ET.SubElement(element, "chassis", {"name": "server", "implement": "MUST"})
            ET.SubElement(element, "chassis", {"name": "client", "implement": "MAY"})
            later = [c for c in root.findall("class") if int(c.get("index")) > rabbit_class["id"]]
            position = list(root).index(later[0]) if later else len(root)
            root.insert(position, element)
            classes[name] = element
        class_element = classes[name]
        known = {m.get("name") for m in class_element.findall("method")}
        for method in rabbit_class["methods"]:
            if method["name"] not in known:
                class_element.append(method_from_json(name, method, domains))

    for (class_name, method_name), receiver in EXTRA_CHASSIS.items():
        method = classes[class_name].find(f"method[@name='{method_name}']")
        chassis = method.findall("chassis")
        if receiver not in {c.get("name") for c in chassis}:
            position = list(method).index(chassis[-1]) + 1
            method.insert(position, ET.Element("chassis", {"name": receiver, "implement": "MUST"}))
    for (class_name, method_name, field_name), new_name in RESTORED_FIELDS.items():
        field = classes[class_name].find(f"method[@name='{method_name}']/field[@name='{field_name}']")
        field.attrib = {"name": new_name, "domain": "bit"}
    return root


def render(root: ET.Element) -> str:
    ET.indent(root, space="  ")
    header = ("<?xml version=\"1.0\"?>\n"
              "<!-- Generated by tools/make_spec.py: structure of the official AMQP 0-9-1 XML plus\n"
              "     RabbitMQ's extensions; see spec/README.md for where each fact comes from. -->\n")
    return header + ET.tostring(root, encoding="unicode") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--check", action="store_true", help="fail if spec/amqp0-9-1.xml is stale")
    args = parser.parse_args(argv)
    text = render(build(args.shared))
    if args.check:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT} differs from what {args.shared} gives; rerun tools/make_spec.py",
                  file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
