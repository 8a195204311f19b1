"""Parsed specs kept between runs (amqpcap.protocol.spec_cache): what is read back is the spec the XML
makes, and a cache that is missing, damaged, of another layout or switched off costs only a parse."""

from __future__ import annotations

import marshal

import msgspec
import pytest

from amqpcap.protocol import spec as spec_module
from amqpcap.protocol import spec_cache
from amqpcap.protocol.spec import BUNDLED, from_plain, load_spec, parse_spec, to_plain


def _tree(value):
    """A value with every Struct in it as its type and fields (all of them, whatever they are)."""
    if isinstance(value, msgspec.Struct):
        return (type(value).__name__, {k: _tree(v) for k, v in msgspec.structs.asdict(value).items()})
    if isinstance(value, dict):
        return ("dict", [(_tree(k), _tree(v)) for k, v in value.items()])  # (in order)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, [_tree(v) for v in value])
    if isinstance(value, frozenset):
        return ("frozenset", sorted(value))
    return value


def _xml(version: str) -> bytes:
    return spec_module._bundled_bytes(BUNDLED[version])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AMQPCAP_CACHE_DIR", str(tmp_path))
    load_spec.cache_clear()
    yield tmp_path
    load_spec.cache_clear()


@pytest.mark.parametrize("version", sorted(BUNDLED))
def test_a_spec_read_back_is_the_spec_its_xml_makes(version):
    parsed = parse_spec(_xml(version), "spec/x.xml")
    read = from_plain(marshal.loads(marshal.dumps(to_plain(parsed))), "spec/x.xml")
    assert _tree(read) == _tree(parsed)
    assert [m.full_name for m in read.methods()] == [m.full_name for m in parsed.methods()]


def test_the_official_xml_with_its_prose_reads_back_the_same(shared):
    data = (shared / "seeds/003_f593309a8c6e3f5a.txt").read_bytes()
    parsed = parse_spec(data, "official")
    assert _tree(from_plain(marshal.loads(marshal.dumps(to_plain(parsed))), "official")) == _tree(parsed)


def test_a_spec_parsed_once_is_read_from_the_cache_after(cache, monkeypatch):
    first = load_spec("0-9-1")
    assert len(list(cache.iterdir())) == 1
    load_spec.cache_clear()

    def no_parsing(*args):
        raise AssertionError("parsed again")
    monkeypatch.setattr(spec_module, "parse_spec", no_parsing)
    again = load_spec("0-9-1")
    assert again is not first and _tree(again) == _tree(first)


@pytest.mark.parametrize("damage", [b"", b"garbage", b"\xe3\x00\x00", "truncated", "other layout"])
def test_a_damaged_or_foreign_cache_file_is_parsed_again_and_rewritten(cache, damage):
    expected = _tree(load_spec("0-9"))
    [path] = cache.iterdir()
    if damage == "truncated":
        damage = path.read_bytes()[:-40]
    elif damage == "other layout":
        damage = marshal.dumps((99, "something else"))
    path.write_bytes(damage)
    load_spec.cache_clear()
    assert _tree(load_spec("0-9")) == expected
    assert _tree(from_plain(marshal.loads(path.read_bytes()), "spec/amqp0-9.xml")) == expected


def test_no_cache_when_switched_off_or_unwritable(tmp_path, monkeypatch):
    monkeypatch.setenv("AMQPCAP_CACHE_DIR", "")
    load_spec.cache_clear()
    assert spec_cache.directory() is None and load_spec("0-9-1").version == "0-9-1"
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("AMQPCAP_CACHE_DIR", str(blocked / "cache"))
    load_spec.cache_clear()
    assert load_spec("0-9-1").version == "0-9-1" and blocked.read_text() == "not a directory"
    load_spec.cache_clear()


def test_an_edited_spec_file_is_parsed_afresh(cache, tmp_path):
    path = tmp_path / "my.xml"
    path.write_bytes(_xml("0-9-1"))
    assert load_spec(str(path)).method_named("exchange.declare").fields[1].name == "exchange"
    path.write_bytes(_xml("0-9-1").replace(b'<field name="exchange" ', b'<field name="exchange-name" ', 1))
    load_spec.cache_clear()
    renamed = load_spec(str(path))
    assert renamed.source == str(path)
    assert renamed.method_named("exchange.declare").fields[1].name == "exchange-name"
