"""Populated instances of every generated message, for the codec tests.

``populated(...)`` walks the JSON schema (through the code generator's own
parser) and fills every field present in a version with a non-default value,
including nested arrays, nullable values and tagged fields.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from shoal.protocol import codegen
from shoal.protocol.codegen import FieldSpec, MessageSpec
from shoal.protocol.generated import message_class

SPECS: dict[str, MessageSpec] = {s.name: s for s in codegen.load_all()}

_INT_RANGES = {
    "int8": (-128, 127),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_ALPHABET = "abcxyz-_.09ÉéßΩ漢字🙂"


def primitive(t: str, rng: random.Random, default: object) -> Any:
    """A random value of primitive type ``t`` other than ``default``."""
    while True:
        if t == "bool":
            v: Any = not default
        elif t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            v = rng.choice([rng.randint(lo, hi), rng.randint(max(lo, -5), min(hi, 300)), lo, hi])
        elif t == "float64":
            v = rng.uniform(-1e9, 1e9)
        elif t == "string":
            v = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 12)))
        elif t in ("bytes", "records"):
            v = rng.randbytes(rng.choice([1, 5, 40, 200]))
        elif t == "uuid":
            v = uuid.UUID(int=rng.getrandbits(128) | 1)
        else:
            raise AssertionError(t)
        if v != default:
            return v


def _field_present(spec: MessageSpec, f: FieldSpec, v: int) -> bool:
    if f.tag is not None:
        return v in spec.flexible and v in f.tagged
    return v in f.versions


def populated(spec: MessageSpec, version: int, rng: random.Random, struct_name: str | None = None) -> Any:
    """An instance of ``spec``'s class (or one of its structs) with non-default values for ``version``."""
    top = message_class(spec.name)
    st = spec.root if struct_name is None else spec.structs[struct_name]
    cls = top if struct_name is None else getattr(top, struct_name)
    kwargs: dict[str, Any] = {}
    for f in st.fields:
        if not _field_present(spec, f, version):
            continue
        default = codegen.default_value(f)
        nullable = version in f.nullable
        # A null is a non-default value only where the default is not null.
        if nullable and default is not None and rng.random() < 0.3:
            kwargs[f.attr] = None
            continue
        if f.is_array:
            n = rng.randint(1, 3)
            if f.is_struct:
                kwargs[f.attr] = [populated(spec, version, rng, f.elem) for _ in range(n)]
            else:
                kwargs[f.attr] = [primitive(f.elem, rng, None) for _ in range(n)]
        elif f.is_struct:
            kwargs[f.attr] = populated(spec, version, rng, f.elem)
        else:
            kwargs[f.attr] = primitive(f.type, rng, default)
    return cls(**kwargs)
