"""Tagged fields: unknown tags are skipped, nested and struct tags work.

Two versions of a small schema are generated into a temp dir: a "newer" one
with extra tagged fields (nested in array structs too) and an "older" one
without them. Bytes from the newer codec must decode with the older codec.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from types import ModuleType

import pytest

from shoal.protocol import codegen
from shoal.protocol.errors import DecodeError
from shoal.protocol.generated import message_class
from shoal.protocol.primitives import read_uvarint, uvarint_bytes

NEW = {
    "type": "data",
    "name": "TagProbe",
    "validVersions": "0-1",
    "flexibleVersions": "1+",
    "fields": [
        {"name": "Id", "type": "int32", "versions": "0+"},
        {
            "name": "Items",
            "type": "[]Item",
            "versions": "0+",
            "fields": [
                {"name": "Name", "type": "string", "versions": "0+"},
                {
                    "name": "Extra",
                    "type": "int64",
                    "versions": "1+",
                    "taggedVersions": "1+",
                    "tag": 5,
                    "default": "-1",
                },
                {
                    "name": "Blob",
                    "type": "bytes",
                    "versions": "1+",
                    "taggedVersions": "1+",
                    "tag": 300,
                    "nullableVersions": "1+",
                    "default": "null",
                },
            ],
        },
        {
            "name": "Known",
            "type": "string",
            "versions": "1+",
            "taggedVersions": "1+",
            "tag": 0,
            "nullableVersions": "1+",
            "default": "null",
        },
        {"name": "Future", "type": "[]int32", "versions": "1+", "taggedVersions": "1+", "tag": 7},
        {
            "name": "Sub",
            "type": "Sub",
            "versions": "1+",
            "taggedVersions": "1+",
            "tag": 9,
            "fields": [{"name": "X", "type": "int32", "versions": "1+"}],
        },
    ],
}


def _old_schema() -> dict:
    old = json.loads(json.dumps(NEW))
    old["fields"][1]["fields"] = old["fields"][1]["fields"][:1]
    old["fields"] = old["fields"][:3]
    return old


def _generate(tmp: Path, tag: str, schema: dict) -> ModuleType:
    src = tmp / tag / "clients"
    src.mkdir(parents=True)
    # Comments must be stripped like in Kafka's files.
    (src / "TagProbe.json").write_text("// licence header\n" + json.dumps(schema, indent=2))
    files = codegen.generate_all(tmp / tag)
    path = tmp / tag / "tag_probe.py"
    path.write_text(files["tag_probe.py"])
    spec = importlib.util.spec_from_file_location(f"tag_probe_{tag}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> tuple[type, type]:
    tmp = tmp_path_factory.mktemp("tags")
    return _generate(tmp, "new", NEW).TagProbe, _generate(tmp, "old", _old_schema()).TagProbe


def test_unknown_tags_are_skipped_top_level_and_nested(probes: tuple[type, type]) -> None:
    new, old = probes
    msg = new(
        id=42,
        items=[new.Item(name="a", extra=7, blob=b"x" * 200), new.Item(name="b")],
        known="k",
        future=[1, 2, 3],
        sub=new.Sub(x=9),
    )
    data = msg.encode(1)
    assert new.decode(data, 1) == msg
    back = old.decode(data, 1)
    assert back.id == 42 and back.known == "k"
    assert [i.name for i in back.items] == ["a", "b"]
    # the old codec re-encodes without the unknown tags, and the new one reads that
    again = new.decode(back.encode(1), 1)
    assert again.future == [] and again.sub == new.Sub() and again.items[0].extra == -1
    # Version 0 is not flexible: no tags at all.
    assert old.decode(new(id=1, items=[new.Item(name="z")]).encode(0), 0).items[0].name == "z"


def test_tagged_fields_written_only_when_not_default(probes: tuple[type, type]) -> None:
    new, _old = probes
    assert new(id=1).encode(1) == b"\x00\x00\x00\x01" + b"\x01" + b"\x00"
    data = new(id=1, known="hi").encode(1)
    # one tag: tag 0, size 3, compact string "hi"
    assert data == b"\x00\x00\x00\x01\x01" + b"\x01\x00\x03\x03hi"
    # two-byte varint tag number (300) inside an array element
    data = new(id=1, items=[new.Item(name="", blob=b"")]).encode(1)
    assert uvarint_bytes(300) in data
    assert new.decode(data, 1).items[0].blob == b""


def test_tagged_struct_includes_its_own_tag_section(probes: tuple[type, type]) -> None:
    new, _old = probes
    data = new(id=0, sub=new.Sub(x=5)).encode(1)
    # tags: count 1, tag 9, size 5 = int32 + empty tag section of the struct
    assert data.endswith(b"\x01\x09\x05\x00\x00\x00\x05\x00")


def test_unknown_tags_on_real_messages() -> None:
    """Append unknown tags to the top-level tag section of every flexible message."""
    from tests.unit.protocol_samples import SPECS, populated

    extra = b"\x02" + uvarint_bytes(1000) + b"\x03abc" + uvarint_bytes(20000) + b"\x00"
    checked = 0
    for name, spec in sorted(SPECS.items()):
        cls = message_class(name)
        for v in range(spec.valid.hi + 1):
            if v not in spec.flexible or any(f.tag is not None and v in f.tagged for f in spec.root.fields):
                continue
            obj = populated(spec, v, random.Random(f"tags/{name}/{v}"))
            data = obj.encode(v)
            assert data.endswith(b"\x00")
            assert cls.decode(data[:-1] + extra, v) == obj
            checked += 1
    assert checked > 150


def test_truncated_tag_section_is_decode_error() -> None:
    from shoal.protocol.generated.api_versions_request import ApiVersionsRequest

    data = ApiVersionsRequest(client_software_name="x", client_software_version="1").encode(3)
    with pytest.raises(DecodeError):
        ApiVersionsRequest.decode(data[:-1] + b"\x01\x05\x10ab", 3)


def test_uvarint_round_trip() -> None:
    for n in (0, 1, 127, 128, 300, 16383, 16384, 2**31 - 1, 2**32 - 1):
        enc = uvarint_bytes(n)
        assert read_uvarint(enc, 0) == (n, len(enc))
    with pytest.raises(DecodeError):
        read_uvarint(b"\x80\x80", 0)
