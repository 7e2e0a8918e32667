"""Generate ``shoal/protocol/generated/`` from Kafka's JSON message schemas.

Run ``python -m shoal.protocol.codegen [--schemas DIR] [--out DIR]``.

Every message becomes one module holding one top-level class (the JSON
``name``) with its structs as nested classes. Encoding and decoding are plain
straight-line functions, one per distinct wire layout (versions whose layout is
identical share a function), using precompiled ``struct.Struct`` objects that
cover runs of fixed-width fields at once. Output is deterministic.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA_SUBDIRS = ("clients", "group-coordinator", "transaction-coordinator", "share-coordinator")
INF = 1 << 30

# Fixed-width primitives: struct format char and byte size.
FIXED: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}
PRIMITIVES = set(FIXED) | {"string", "bytes", "records"}


# ---------------------------------------------------------------------------
# schema model


@dataclass(frozen=True)
class VersionRange:
    """An inclusive version range; ``empty`` for "none"."""

    lo: int
    hi: int

    @staticmethod
    def parse(text: str | None) -> VersionRange:
        if text is None or text == "none" or text == "":
            return EMPTY
        text = text.strip()
        if text.endswith("+"):
            return VersionRange(int(text[:-1]), INF)
        if "-" in text:
            a, b = text.split("-", 1)
            return VersionRange(int(a), int(b))
        return VersionRange(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi


EMPTY = VersionRange(1, 0)


@dataclass
class FieldSpec:
    """One field of a struct, as the JSON declares it."""

    name: str
    attr: str
    type: str  # raw JSON type, e.g. "int32", "[]string", "[]FetchTopic", "Cursor"
    versions: VersionRange
    nullable: VersionRange
    tagged: VersionRange
    tag: int | None
    ignorable: bool
    default: object  # raw JSON default (str/bool/int) or None when absent
    flexible_override: VersionRange | None
    about: str = ""

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.elem not in PRIMITIVES


@dataclass
class StructSpec:
    """A struct (or the top-level message) and its fields."""

    name: str
    fields: list[FieldSpec]


@dataclass
class MessageSpec:
    """One JSON schema file."""

    name: str
    type: str  # request, response, header, data, ...
    api_key: int | None
    valid: VersionRange
    flexible: VersionRange
    root: StructSpec
    structs: dict[str, StructSpec]  # every named struct (not the root)
    source: str  # path relative to the schemas dir
    listeners: tuple[str, ...] = ()
    latest_unstable: bool = False
    struct_order: list[str] = field(default_factory=list)

    @property
    def module(self) -> str:
        return snake(self.name)


def snake(name: str) -> str:
    """CamelCase / camelCase -> snake_case; keywords get a trailing underscore."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    if keyword.iskeyword(s) or s in ("self",):
        s += "_"
    return s


def strip_comments(text: str) -> str:
    """Remove ``//`` line comments (outside strings) from a schema file."""
    out = []
    for line in text.splitlines():
        in_str = False
        esc = False
        cut = len(line)
        for i, ch in enumerate(line):
            if esc:
                esc = False
                continue
            if ch == "\\":
                esc = True
            elif ch == '"':
                in_str = not in_str
            elif ch == "/" and not in_str and line[i + 1 : i + 2] == "/":
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


def _parse_fields(
    raw: list[dict], structs: dict[str, StructSpec], order: list[str], where: str
) -> list[FieldSpec]:
    fields = []
    seen_attrs: set[str] = set()
    for f in raw:
        ftype = f["type"]
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        if "fields" in f:
            if elem in structs:
                raise ValueError(f"{where}: struct {elem} defined twice")
            # Register before recursing so names stay unique; order = definition order.
            structs[elem] = StructSpec(elem, [])
            order.append(elem)
            structs[elem].fields = _parse_fields(f["fields"], structs, order, f"{where}.{elem}")
        attr = snake(f["name"])
        if attr in seen_attrs:
            raise ValueError(f"{where}: duplicate attribute {attr}")
        seen_attrs.add(attr)
        fields.append(
            FieldSpec(
                name=f["name"],
                attr=attr,
                type=ftype,
                versions=VersionRange.parse(f.get("versions")),
                nullable=VersionRange.parse(f.get("nullableVersions")),
                tagged=VersionRange.parse(f.get("taggedVersions")) if "tag" in f else EMPTY,
                tag=f.get("tag"),
                ignorable=bool(f.get("ignorable", False)),
                default=f.get("default"),
                flexible_override=VersionRange.parse(f["flexibleVersions"])
                if "flexibleVersions" in f
                else None,
                about=f.get("about", ""),
            )
        )
    return fields


def load_schema(path: Path, root_dir: Path) -> MessageSpec:
    """Parse one schema JSON file."""
    data = json.loads(strip_comments(path.read_text()))
    structs: dict[str, StructSpec] = {}
    order: list[str] = []
    # commonStructs first so inline fields may reference them by name.
    for cs in data.get("commonStructs", []):
        structs[cs["name"]] = StructSpec(cs["name"], [])
        order.append(cs["name"])
    for cs in data.get("commonStructs", []):
        structs[cs["name"]].fields = _parse_fields(cs["fields"], structs, order, data["name"])
    root = StructSpec(data["name"], _parse_fields(data["fields"], structs, order, data["name"]))
    spec = MessageSpec(
        name=data["name"],
        type=data["type"],
        api_key=data.get("apiKey"),
        valid=VersionRange.parse(data["validVersions"]),
        flexible=VersionRange.parse(data.get("flexibleVersions", "none")),
        root=root,
        structs=structs,
        source=path.relative_to(root_dir).as_posix(),
        listeners=tuple(data.get("listeners", ())),
        latest_unstable=bool(data.get("latestVersionUnstable", False)),
        struct_order=order,
    )
    for st in [root, *structs.values()]:
        for f in st.fields:
            if f.is_struct and f.elem not in structs:
                raise ValueError(f"{spec.source}: unknown type {f.type}")
    if spec.name in structs:
        raise ValueError(f"{spec.source}: struct named like the message")
    return spec


def default_schemas_dir() -> Path:
    """``<repo>/../shared/kafka-schemas``, found relative to this file."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "kafka-schemas"


def default_out_dir() -> Path:
    return Path(__file__).resolve().parent / "generated"


def overlay_schemas_dir() -> Path:
    """``shoal/protocol/schemas``: newer definitions (Kafka 4.x) that replace the shared file of the same name."""
    return Path(__file__).resolve().parent / "schemas"


def load_all(schemas_dir: Path | None = None, overlay_dir: Path | None = None) -> list[MessageSpec]:
    """Every schema under the known subdirectories, sorted by message name; a file of the
    overlay directory replaces the shared one of the same path (and may add new ones)."""
    schemas_dir = schemas_dir or default_schemas_dir()
    overlay_dir = overlay_dir or overlay_schemas_dir()
    specs = []
    for sub in SCHEMA_SUBDIRS:
        files: dict[str, tuple[Path, Path]] = {}
        for root in (schemas_dir, overlay_dir):
            d = root / sub
            if d.is_dir():
                # an overlay file is named by its path in the repository
                label = root if root == schemas_dir else overlay_dir.parents[2]
                files.update({p.name: (p, label) for p in d.glob("*.json")})
        for name in sorted(files):
            path, label = files[name]
            specs.append(load_schema(path, label))
    specs.sort(key=lambda s: s.name)
    names = [s.module for s in specs]
    if len(names) != len(set(names)):
        raise ValueError("two schemas map to the same module name")
    return specs


# ---------------------------------------------------------------------------
# defaults


def default_value(f: FieldSpec) -> object:
    """The Python value of a field's default (fresh containers are made by callers)."""
    d = f.default
    null = isinstance(d, str) and d.lower() in ("null", "none")
    if f.is_array:
        return None if null else []
    if f.is_struct:
        return None if null else "STRUCT"
    t = f.type
    if t == "bool":
        if d is None:
            return False
        return d if isinstance(d, bool) else str(d).lower() == "true"
    if t in ("int8", "int16", "uint16", "int32", "int64"):
        return 0 if d is None else (d if isinstance(d, int) else int(str(d), 0))
    if t == "float64":
        return 0.0 if d is None else float(d)
    if t == "string":
        if null:
            return None
        return "" if d is None else str(d)
    if t == "bytes":
        return None if null else b""
    if t == "records":
        return None
    if t == "uuid":
        return "UUID0"
    raise ValueError(t)


def default_expr(f: FieldSpec) -> str:
    """Python expression for a fresh default value."""
    v = default_value(f)
    if f.is_array:
        return "None" if v is None else "[]"
    if f.is_struct:
        return "None" if v is None else f"{f.elem}()"
    if v == "UUID0" and f.type == "uuid":
        return "_ZERO_UUID"
    return repr(v)


def non_default_cond(f: FieldSpec, ref: str) -> str:
    """Expression true when ``ref`` differs from the field's default (Kafka's rule)."""
    v = default_value(f)
    if f.is_array:
        return f"{ref} is not None" if v is None else f"{ref}"
    if f.is_struct:
        return f"{ref} is not None" if v is None else f"{ref} != {f.elem}()"
    if f.type in ("bytes", "records"):
        return f"{ref} is not None" if v is None else f"{ref}"
    if f.type == "string" and v is None:
        return f"{ref} is not None"
    if f.type == "uuid":
        return f"{ref} != _ZERO_UUID"
    return f"{ref} != {v!r}"


def py_type(f: FieldSpec, owner: str) -> str:
    base = {
        "bool": "bool",
        "int8": "int",
        "int16": "int",
        "uint16": "int",
        "int32": "int",
        "int64": "int",
        "float64": "float",
        "string": "str",
        "bytes": "bytes",
        "records": "bytes | bytearray | memoryview",
        "uuid": "UUID",
    }
    if f.is_array:
        e = f"{owner}.{f.elem}" if f.is_struct else base[f.elem]
        return f"list[{e}]"
    if f.is_struct:
        return f"{owner}.{f.elem}"
    return base[f.type]


# ---------------------------------------------------------------------------
# code emission


class Emitter:
    """Collects lines with indentation and hands out unique local names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0

    def tmp(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


class ModuleGen:
    """Generates one module for one MessageSpec."""

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.structs: dict[str, StructSpec] = {spec.name: spec.root, **spec.structs}
        self.struct_formats: dict[str, str] = {}  # fmt -> const name
        self.functions: dict[str, str] = {}  # body key -> function name
        self.function_src: list[str] = []
        self.enc_name: dict[tuple[str, int], str] = {}
        self.dec_name: dict[tuple[str, int], str] = {}
        self.max_version = spec.valid.hi

    # -- helpers -------------------------------------------------------

    def sconst(self, fmt: str) -> str:
        fmt = ">" + fmt
        if fmt not in self.struct_formats:
            name = "_S_" + re.sub(r"[^A-Za-z0-9]", "", fmt[1:].replace("?", "o"))
            if name in self.struct_formats.values():
                name += f"_{len(self.struct_formats)}"
            self.struct_formats[fmt] = name
        return self.struct_formats[fmt]

    def flexible(self, v: int) -> bool:
        return v in self.spec.flexible

    def compact(self, f: FieldSpec, v: int) -> bool:
        if not self.flexible(v):
            return False
        if f.flexible_override is not None:
            return v in f.flexible_override
        return True

    def dependency_order(self) -> list[str]:
        """Structs in post-order (nested first), root last."""
        order: list[str] = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            if name in seen:
                return
            seen.add(name)
            for f in self.structs[name].fields:
                if f.is_struct:
                    visit(f.elem)
            order.append(name)

        for name in self.spec.struct_order:
            visit(name)
        visit(self.spec.name)
        return order

    def layout(self, st: StructSpec, v: int) -> tuple[list[FieldSpec], list[FieldSpec], list[FieldSpec]]:
        """(regular fields, tagged fields by tag, absent fields) of ``st`` at version ``v``."""
        flex = self.flexible(v)
        regular, tagged, absent = [], [], []
        for f in st.fields:
            if f.tag is not None and flex and v in f.tagged:
                tagged.append(f)
            elif v in f.versions and f.tag is None:
                regular.append(f)
            else:
                absent.append(f)
        tagged.sort(key=lambda f: f.tag)
        return regular, tagged, absent

    def add_function(self, kind: str, st: str, v: int, body: list[str]) -> str:
        key = kind + st + "\n" + "\n".join(body)
        name = self.functions.get(key)
        if name is None:
            name = f"_{kind}_{st}_v{v}"
            self.functions[key] = name
            sig = "(o, out)" if kind == "enc" else "(buf, pos)"
            self.function_src.append(f"def {name}{sig}:\n" + "\n".join(body) + "\n")
        return name

    # -- decode ----------------------------------------------------------

    def gen_decode(self, st: StructSpec, v: int) -> list[str]:
        em = Emitter()
        regular, tagged, absent = self.layout(st, v)
        ops = [(f, self.dec_field_ops(f, v)) for f in regular]
        self.emit_decode_seq(em, 1, ops)
        if self.flexible(v):
            if tagged:
                for f in tagged:
                    em.emit(1, f"f_{f.attr} = {default_expr(f)}")
                n = em.tmp("n")
                self.emit_read_uv(em, 1, n)
                em.emit(1, f"for _ in range({n}):")
                em.emit(2, "tag, pos = _read_uv(buf, pos)")
                em.emit(2, "size, pos = _read_uv(buf, pos)")
                em.emit(2, "tag_end = pos + size")
                for i, f in enumerate(tagged):
                    em.emit(2, f"{'if' if i == 0 else 'elif'} tag == {f.tag}:")
                    self.emit_decode_seq(em, 3, [(f, self.dec_field_ops(f, v, tagged_ctx=True))])
                em.emit(2, "pos = tag_end")
                em.emit(1, "if pos > len(buf):")
                em.emit(2, "raise _truncated()")
            else:
                em.emit(1, "if buf[pos] == 0:")
                em.emit(2, "pos += 1")
                em.emit(1, "else:")
                em.emit(2, "pos = _skip_tags(buf, pos)")
        em.emit(1, f"o = _new({st.name})")
        for f in st.fields:
            if f in regular or f in tagged:
                em.emit(1, f"o.{f.attr} = f_{f.attr}")
            else:
                em.emit(1, f"o.{f.attr} = {default_expr(f)}")
        em.emit(1, "return o, pos")
        return em.lines

    def dec_field_ops(self, f: FieldSpec, v: int, tagged_ctx: bool = False) -> dict:
        return {
            "compact": self.compact(f, v) or tagged_ctx and self.flexible(v),
            "nullable": v in f.nullable,
            "v": v,
            "tagged": tagged_ctx,
        }

    def emit_decode_seq(self, em: Emitter, ind: int, ops: list[tuple[FieldSpec, dict]]) -> None:
        """Decode fields in order, fusing fixed-width runs into one unpack."""
        run_fmt: list[str] = []
        run_targets: list[str] = []
        run_size = 0
        post: list[str] = []

        def flush() -> None:
            nonlocal run_fmt, run_targets, run_size, post
            if not run_fmt:
                return
            const = self.sconst("".join(run_fmt))
            targets = ", ".join(run_targets) + ("," if len(run_targets) == 1 else "")
            em.emit(ind, f"{targets} = {const}.unpack_from(buf, pos)")
            em.emit(ind, f"pos += {run_size}")
            for line in post:
                em.emit(ind, line)
            run_fmt, run_targets, run_size, post = [], [], 0, []

        for f, ctx in ops:
            var = f"f_{f.attr}"
            compact, nullable, v = ctx["compact"], ctx["nullable"], ctx["v"]
            if not f.is_array and f.type in FIXED:
                ch, size = FIXED[f.type]
                run_fmt.append(ch)
                run_size += size
                if f.type == "uuid":
                    raw = em.tmp("u")
                    run_targets.append(raw)
                    post.append(f"{var} = _UUID(bytes={raw})")
                else:
                    run_targets.append(var)
                continue
            if f.is_struct and not f.is_array:
                flush()
                if nullable:
                    # Kafka marks a nullable struct with a byte, -1 (null) or 1, before it; a tagged one
                    # with a varint, 0 (null) or 1. shoal before 2026-11 wrote -1 in tagged fields too.
                    null_test = "buf[pos] == 0 or buf[pos] >= 0x80" if ctx.get("tagged") else "buf[pos] >= 0x80"
                    em.emit(ind, f"if {null_test}:")
                    em.emit(ind + 1, f"{var} = None")
                    em.emit(ind + 1, "pos += 1")
                    em.emit(ind, "else:")
                    em.emit(ind + 1, f"{var}, pos = {self.dec_name[(f.elem, v)]}(buf, pos + 1)")
                else:
                    em.emit(ind, f"{var}, pos = {self.dec_name[(f.elem, v)]}(buf, pos)")
                continue
            # Variable-length: a length/count prefix then a body.
            n = em.tmp("n")
            if compact:
                flush()
                self.emit_read_uv(em, ind, n)
                em.emit(ind, f"{n} -= 1")
            else:
                if f.is_array or f.type in ("bytes", "records"):
                    run_fmt.append("i")
                    run_size += 4
                else:
                    run_fmt.append("h")
                    run_size += 2
                run_targets.append(n)
                flush()
            self.emit_var_body(em, ind, f, var, n, nullable, compact, v)
        flush()

    @staticmethod
    def emit_read_uv(em: Emitter, ind: int, n: str) -> None:
        """Read an unsigned varint into ``n``, the one-byte case inline."""
        em.emit(ind, f"{n} = buf[pos]")
        em.emit(ind, f"if {n} < 0x80:")
        em.emit(ind + 1, "pos += 1")
        em.emit(ind, "else:")
        em.emit(ind + 1, f"{n}, pos = _read_uv(buf, pos)")

    def emit_var_body(
        self, em: Emitter, ind: int, f: FieldSpec, var: str, n: str, nullable: bool, compact: bool, v: int
    ) -> None:
        """Decode the body of a string/bytes/records/array whose length is in ``n``."""
        em.emit(ind, f"if {n} < 0:")
        if nullable:
            em.emit(ind + 1, f"{var} = None")
        else:
            em.emit(ind + 1, f"raise _null_error({f.name!r})")
        em.emit(ind, "else:")
        i2 = ind + 1
        if not f.is_array:
            em.emit(i2, f"end = pos + {n}")
            em.emit(i2, "if end > len(buf):")
            em.emit(i2 + 1, "raise _truncated()")
            if f.type == "string":
                em.emit(i2, f"{var} = _utf8(buf[pos:end])[0]")
            elif f.type == "bytes":
                em.emit(i2, f"{var} = bytes(buf[pos:end])")
            else:  # records: zero-copy view
                em.emit(i2, f"{var} = memoryview(buf)[pos:end]")
            em.emit(i2, "pos = end")
            return
        elem = f.elem
        if elem in FIXED and elem != "uuid":
            ch, size = FIXED[elem]
            em.emit(i2, f"{var} = list(_unpack_from('>%d{ch}' % {n}, buf, pos))")
            em.emit(i2, f"pos += {size} * {n}")
            return
        em.emit(i2, f"{var} = []")
        em.emit(i2, f"append = {var}.append")
        em.emit(i2, f"for _ in range({n}):")
        i3 = i2 + 1
        if elem in PRIMITIVES:
            item = em.tmp("e")
            sub = FieldSpec(f.name, f.attr, elem, f.versions, EMPTY, EMPTY, None, True, None, None)
            if elem == "uuid":
                em.emit(i3, "if pos + 16 > len(buf):")
                em.emit(i3 + 1, "raise _truncated()")
                em.emit(i3, "append(_UUID(bytes=bytes(buf[pos:pos + 16])))")
                em.emit(i3, "pos += 16")
                return
            m = em.tmp("n")
            if compact:
                self.emit_read_uv(em, i3, m)
                em.emit(i3, f"{m} -= 1")
            else:
                fmt = "h" if elem == "string" else "i"
                em.emit(i3, f"{m}, = {self.sconst(fmt)}.unpack_from(buf, pos)")
                em.emit(i3, f"pos += {2 if fmt == 'h' else 4}")
            self.emit_var_body(em, i3, sub, item, m, False, compact, v)
            em.emit(i3, f"append({item})")
        else:
            item = em.tmp("e")
            em.emit(i3, f"{item}, pos = {self.dec_name[(elem, v)]}(buf, pos)")
            em.emit(i3, f"append({item})")

    # -- encode ----------------------------------------------------------

    def gen_encode(self, st: StructSpec, v: int) -> list[str]:
        em = Emitter()
        regular, tagged, absent = self.layout(st, v)
        for f in absent:
            if not f.ignorable:
                em.emit(1, f"if {non_default_cond(f, 'o.' + f.attr)}:")
                em.emit(
                    2,
                    f"raise _UnsupportedVersionError("
                    f"'field {st.name}.{f.name} is not supported in version {v}')",
                )
        ops = [(f, {"compact": self.compact(f, v), "nullable": v in f.nullable, "v": v}) for f in regular]
        self.emit_encode_seq(em, 1, ops, "out")
        if self.flexible(v):
            if not tagged:
                em.emit(1, "out += b'\\x00'")
            else:
                em.emit(1, "ntags = 0")
                for f in tagged:
                    em.emit(1, f"if {non_default_cond(f, 'o.' + f.attr)}:")
                    em.emit(2, "ntags += 1")
                em.emit(1, "out += _uvb(ntags)")
                for f in tagged:
                    em.emit(1, f"if {non_default_cond(f, 'o.' + f.attr)}:")
                    em.emit(2, f"out += _uvb({f.tag})")
                    em.emit(2, "tb = bytearray()")
                    ctx = {"compact": True, "nullable": v in f.nullable, "v": v, "tagged": True}
                    self.emit_encode_seq(em, 2, [(f, ctx)], "tb")
                    em.emit(2, "out += _uvb(len(tb))")
                    em.emit(2, "out += tb")
        if not em.lines:
            em.emit(1, "pass")
        return em.lines

    def emit_encode_seq(self, em: Emitter, ind: int, ops: list[tuple[FieldSpec, dict]], out: str) -> None:
        run_fmt: list[str] = []
        run_args: list[str] = []

        def flush() -> None:
            nonlocal run_fmt, run_args
            if run_fmt:
                const = self.sconst("".join(run_fmt))
                em.emit(ind, f"{out} += {const}.pack({', '.join(run_args)})")
            run_fmt, run_args = [], []

        for f, ctx in ops:
            ref = f"o.{f.attr}"
            compact, nullable, v = ctx["compact"], ctx["nullable"], ctx["v"]
            if not f.is_array and f.type in FIXED:
                run_fmt.append(FIXED[f.type][0])
                run_args.append(f"{ref}.bytes" if f.type == "uuid" else ref)
                continue
            if f.is_struct and not f.is_array:
                flush()
                fn = self.enc_name[(f.elem, v)]
                if nullable:
                    em.emit(ind, f"if {ref} is None:")
                    null_mark = "b'\\x00'" if ctx.get("tagged") else "b'\\xff'"
                    em.emit(ind + 1, f"{out} += {null_mark}")
                    em.emit(ind, "else:")
                    em.emit(ind + 1, f"{out} += b'\\x01'")
                    em.emit(ind + 1, f"{fn}({ref}, {out})")
                else:
                    em.emit(ind, f"{fn}({ref}, {out})")
                continue
            # variable length
            if f.is_array:
                val = ref
                length = f"len({ref})"
            elif f.type == "string":
                val = em.tmp("b")
                if nullable:
                    em.emit(ind, f"{val} = None if {ref} is None else {ref}.encode()")
                else:
                    em.emit(ind, f"{val} = {ref}.encode()")
                length = f"len({val})"
            else:
                val = ref
                length = f"len({ref})"
            if compact:
                flush()
                if nullable:
                    em.emit(ind, f"{out} += _uvb(0 if {val} is None else {length} + 1)")
                else:
                    em.emit(ind, f"{out} += _uvb({length} + 1)")
            else:
                run_fmt.append("i" if (f.is_array or f.type in ("bytes", "records")) else "h")
                run_args.append(f"-1 if {val} is None else {length}" if nullable else length)
                flush()
            body_ind = ind
            if nullable:
                em.emit(ind, f"if {val} is not None:")
                body_ind = ind + 1
            self.emit_encode_body(em, body_ind, f, val, compact, v, out)
        flush()

    def emit_encode_body(
        self, em: Emitter, ind: int, f: FieldSpec, val: str, compact: bool, v: int, out: str
    ) -> None:
        if not f.is_array:
            em.emit(ind, f"{out} += {val}")
            return
        elem = f.elem
        if elem in FIXED and elem != "uuid":
            ch = FIXED[elem][0]
            em.emit(ind, f"{out} += _pack('>%d{ch}' % len({val}), *{val})")
            return
        item = em.tmp("e")
        em.emit(ind, f"for {item} in {val}:")
        i2 = ind + 1
        if elem == "uuid":
            em.emit(i2, f"{out} += {item}.bytes")
        elif elem == "string":
            b = em.tmp("b")
            em.emit(i2, f"{b} = {item}.encode()")
            if compact:
                em.emit(i2, f"{out} += _uvb(len({b}) + 1)")
            else:
                em.emit(i2, f"{out} += {self.sconst('h')}.pack(len({b}))")
            em.emit(i2, f"{out} += {b}")
        elif elem in ("bytes", "records"):
            if compact:
                em.emit(i2, f"{out} += _uvb(len({item}) + 1)")
            else:
                em.emit(i2, f"{out} += {self.sconst('i')}.pack(len({item}))")
            em.emit(i2, f"{out} += {item}")
        else:
            em.emit(i2, f"{self.enc_name[(elem, v)]}({item}, {out})")

    # -- classes -----------------------------------------------------------

    def gen_class(self, st: StructSpec, indent: int, top: bool) -> list[str]:
        spec = self.spec
        owner = spec.name
        pad = "    " * indent
        lines = [f"{pad}class {st.name}:"]
        p1 = pad + "    "
        p2 = p1 + "    "
        doc = f"{spec.type} {spec.name}" if top else f"struct {st.name} of {spec.name}"
        lines.append(f'{p1}"""Kafka {doc} (versions {spec.valid.lo}-{spec.valid.hi})."""')
        lines.append("")
        slots = ", ".join(repr(f.attr) for f in st.fields)
        lines.append(f"{p1}__slots__ = ({slots}{',' if len(st.fields) == 1 else ''})")
        lines.append(f"{p1}_FIELDS = __slots__")
        if top:
            lines.append(f"{p1}NAME = {spec.name!r}")
            lines.append(f"{p1}TYPE = {spec.type!r}")
            lines.append(f"{p1}API_KEY = {spec.api_key!r}")
            lines.append(f"{p1}MIN_VERSION = {spec.valid.lo}")
            lines.append(f"{p1}MAX_VERSION = {spec.valid.hi}")
            flex_min = None if spec.flexible.empty else spec.flexible.lo
            lines.append(f"{p1}FLEXIBLE_MIN = {flex_min!r}")
            for name in spec.struct_order:
                lines.append("")
                lines.extend(self.gen_class(self.structs[name], indent + 1, False))
        lines.append("")
        if st.fields:
            params = []
            body = []
            for f in st.fields:
                t = py_type(f, owner)
                dv = default_value(f)
                if f.is_array or f.is_struct:
                    if dv is None:
                        params.append(f"{f.attr}: {t} | None = None")
                        body.append(f"{p2}self.{f.attr} = {f.attr}")
                    elif not f.nullable.empty:
                        # None is a real value here: a sentinel marks "not given".
                        params.append(f"{f.attr}: {t} | None = _UNSET")
                        body.append(
                            f"{p2}self.{f.attr} = {default_expr(f)} if {f.attr} is _UNSET else {f.attr}"
                        )
                    else:
                        params.append(f"{f.attr}: {t} | None = None")
                        body.append(
                            f"{p2}self.{f.attr} = {default_expr(f)} if {f.attr} is None else {f.attr}"
                        )
                else:
                    expr = default_expr(f)
                    nullable_t = " | None" if (not f.nullable.empty or dv is None) else ""
                    params.append(f"{f.attr}: {t}{nullable_t} = {expr}")
                    body.append(f"{p2}self.{f.attr} = {f.attr}")
            lines.append(f"{p1}def __init__(")
            lines.append(f"{p2}self,")
            lines.append(f"{p2}*,")
            for prm in params:
                lines.append(f"{p2}{prm},")
            lines.append(f"{p1}) -> None:")
            lines.extend(body)
        else:
            lines.append(f"{p1}def __init__(self) -> None:")
            lines.append(f"{p2}pass")
        lines.append("")
        lines.append(f"{p1}def __eq__(self, other: object) -> bool:")
        conds = " and ".join(f"self.{f.attr} == other.{f.attr}" for f in st.fields) or "True"
        lines.append(f"{p2}if other.__class__ is not self.__class__:")
        lines.append(f"{p2}    return NotImplemented")
        lines.append(f"{p2}return {conds}")
        lines.append("")
        lines.append(f"{p1}__hash__ = None  # type: ignore[assignment]")
        lines.append("")
        lines.append(f"{p1}def __repr__(self) -> str:")
        parts = ", ".join(f"{f.attr}={{self.{f.attr}!r}}" for f in st.fields)
        lines.append(f'{p2}return f"{st.name}({parts})"')
        if top:
            check = [f"{p2}if not 0 <= version <= {spec.valid.hi}:",
                     f"{p2}    raise _UnsupportedVersionError(f'{spec.name} version {{version}}')"]
            decode_error = [f"{p2}except (_StructError, IndexError, UnicodeDecodeError) as e:",
                            f"{p2}    raise _DecodeError(f'{spec.name} v{{version}}: {{e}}') from None"]
            lines.append("")
            lines.append(f"{p1}def encode(self, version: int) -> bytes:")
            lines.append(f'{p2}"""Encode the body of this message at ``version`` (no header, no size)."""')
            lines.extend(check)
            lines.append(f"{p2}out = bytearray()")
            lines.append(f"{p2}_ENCODERS[version](self, out)")
            lines.append(f"{p2}return bytes(out)")
            lines.append("")
            lines.append(f"{p1}def encode_into(self, out: bytearray, version: int) -> None:")
            lines.append(f'{p2}"""Append the encoded body to ``out``."""')
            lines.extend(check)
            lines.append(f"{p2}_ENCODERS[version](self, out)")
            lines.append("")
            lines.append(f"{p1}@classmethod")
            lines.append(
                f"{p1}def decode(cls, buf: bytes | bytearray | memoryview, version: int) -> {spec.name}:"
            )
            lines.append(f'{p2}"""Decode a whole body at ``version``; unknown tagged fields are skipped."""')
            lines.extend(check)
            lines.append(f"{p2}try:")
            lines.append(f"{p2}    return _DECODERS[version](buf, 0)[0]")
            lines.extend(decode_error)
            lines.append("")
            lines.append(f"{p1}@classmethod")
            lines.append(
                f"{p1}def decode_from(cls, buf: bytes | bytearray | memoryview, pos: int, version: int)"
                f" -> tuple[{spec.name}, int]:"
            )
            lines.append(f'{p2}"""Decode starting at ``pos``; return (message, end position)."""')
            lines.extend(check)
            lines.append(f"{p2}try:")
            lines.append(f"{p2}    return _DECODERS[version](buf, pos)")
            lines.extend(decode_error)
        return lines

    # -- module ---------------------------------------------------------------

    def generate(self) -> str:
        spec = self.spec
        order = self.dependency_order()
        for v in range(0, spec.valid.hi + 1):
            for name in order:
                st = self.structs[name]
                self.dec_name[(name, v)] = self.add_function("dec", name, v, self.gen_decode(st, v))
                self.enc_name[(name, v)] = self.add_function("enc", name, v, self.gen_encode(st, v))
        out: list[str] = []
        out.append(f"# generated by shoal.protocol.codegen from {spec.source}; do not edit")
        out.append(f'"""Kafka {spec.type} {spec.name} (generated codec)."""')
        out.append("")
        out.append("from __future__ import annotations")
        out.append("")
        out.append("from typing import Any")
        out.append("from codecs import utf_8_decode as _utf8")
        out.append("from struct import Struct as _Struct")
        out.append("from struct import error as _StructError")
        out.append("from struct import pack as _pack")
        out.append("from struct import unpack_from as _unpack_from")
        out.append("from uuid import UUID")
        out.append("from uuid import UUID as _UUID")
        out.append("")
        out.append("from shoal.protocol.primitives import DecodeError as _DecodeError")
        out.append(
            "from shoal.protocol.primitives import UnsupportedVersionError as _UnsupportedVersionError"
        )
        out.append("from shoal.protocol.primitives import null_error as _null_error")
        out.append("from shoal.protocol.primitives import read_uvarint as _read_uv")
        out.append("from shoal.protocol.primitives import skip_tagged_fields as _skip_tags")
        out.append("from shoal.protocol.primitives import truncated as _truncated")
        out.append("from shoal.protocol.primitives import uvarint_bytes as _uvb")
        out.append("")
        names = [spec.name, *spec.struct_order]
        out.append("__all__ = [" + ", ".join(repr(n) for n in sorted(names)) + "]")
        out.append("")
        out.append("_new = object.__new__")
        out.append("_ZERO_UUID = _UUID(int=0)")
        out.append("_UNSET: Any = object()  # constructor default for nullable lists/structs")
        # The functions are emitted before the struct constants are known; collect first.
        funcs = "\n\n".join(self.function_src)
        for fmt, const in sorted(self.struct_formats.items(), key=lambda kv: kv[1]):
            out.append(f"{const} = _Struct({fmt!r})")
        out.append("")
        out.append("")
        out.extend(self.gen_class(spec.root, 0, True))
        out.append("")
        out.append("")
        for name in spec.struct_order:
            out.append(f"{name} = {spec.name}.{name}")
        if spec.struct_order:
            out.append("")
            out.append("")
        out.append(funcs)
        out.append("")
        encs = ", ".join(self.enc_name[(spec.name, v)] for v in range(spec.valid.hi + 1))
        decs = ", ".join(self.dec_name[(spec.name, v)] for v in range(spec.valid.hi + 1))
        out.append(f"_ENCODERS = ({encs},)")
        out.append(f"_DECODERS = ({decs},)")
        text = "\n".join(out).rstrip() + "\n"
        # The UUID alias is only needed for annotations; keep import lint-free for readers.
        return text


# ---------------------------------------------------------------------------
# package __init__


def gen_init(specs: list[MessageSpec]) -> str:
    by_name = {s.name: s for s in specs}
    lines = [
        "# generated by shoal.protocol.codegen from the Kafka JSON schemas; do not edit",
        '"""Generated Kafka message codecs: one module per schema, and the API table.',
        "",
        "``API_BY_KEY`` is built lazily on first access so that importing a single",
        "message module does not import every API.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from typing import Any, NamedTuple",
        "",
        "",
        "class ApiSpec(NamedTuple):",
        '    """One Kafka API: its key, name, message classes and version ranges."""',
        "",
        "    api_key: int",
        "    name: str",
        "    request: Any",
        "    response: Any",
        "    min_version: int",
        "    max_version: int",
        "    flexible_min: int | None",
        "    listeners: tuple[str, ...] = ()",
        "    latest_version_unstable: bool = False",
        "",
        "",
        "# api_key -> (name, request module, request class, response module, response class,",
        "#            min, max, flexible_min, listeners, latest_version_unstable)",
        "_API_TABLE: dict[int, tuple] = {",
    ]
    reqs = sorted((s for s in specs if s.type == "request"), key=lambda s: s.api_key)
    for r in reqs:
        resp_name = r.name[: -len("Request")] + "Response"
        resp = by_name[resp_name]
        api_name = r.name[: -len("Request")]
        flex = None if r.flexible.empty else r.flexible.lo
        lines.append(
            f"    {r.api_key}: ({api_name!r}, {r.module!r}, {r.name!r}, {resp.module!r}, {resp.name!r}, "
            f"{r.valid.lo}, {r.valid.hi}, {flex!r}, {r.listeners!r}, {r.latest_unstable!r}),"
        )
    lines.append("}")
    lines.append("")
    lines.append("# api key -> first flexible version (None: never flexible); cheap, imports nothing")
    lines.append("FLEXIBLE_MIN_BY_KEY: dict[int, int | None] = {k: v[7] for k, v in _API_TABLE.items()}")
    lines.append("")
    lines.append("# api key -> (min version, max version); cheap, imports nothing")
    lines.append("VERSION_RANGES: dict[int, tuple[int, int]] = {k: (v[5], v[6]) for k, v in _API_TABLE.items()}")
    lines.append("")
    lines.append("# API name -> api key")
    lines.append("API_KEYS: dict[str, int] = {")
    for r in reqs:
        lines.append(f"    {r.name[: -len('Request')]!r}: {r.api_key},")
    lines.append("}")
    lines.append("")
    lines.append("# message name -> module name, for every schema")
    lines.append("MODULES: dict[str, str] = {")
    for s in specs:
        lines.append(f"    {s.name!r}: {s.module!r},")
    lines.append("}")
    lines.append("")
    lines.append("_api_by_key: dict[int, ApiSpec] | None = None")
    lines.append("")
    lines.append("")
    lines.append("def message_class(name: str) -> Any:")
    lines.append('    """The generated class for a message name, e.g. ``"FetchRequest"``."""')
    lines.append('    module = importlib.import_module(f"{__name__}.{MODULES[name]}")')
    lines.append("    return getattr(module, name)")
    lines.append("")
    lines.append("")
    lines.append("_spec_cache: dict[int, ApiSpec] = {}")
    lines.append("")
    lines.append("")
    lines.append("def api_spec(api_key: int) -> ApiSpec:")
    lines.append('    """One API\'s spec, importing only its two modules (KeyError if unknown)."""')
    lines.append("    spec = _spec_cache.get(api_key)")
    lines.append("    if spec is None:")
    lines.append("        name, rqm, rqc, rsm, rsc, lo, hi, flex, listeners, unstable = _API_TABLE[api_key]")
    lines.append('        req = getattr(importlib.import_module(f"{__name__}.{rqm}"), rqc)')
    lines.append('        resp = getattr(importlib.import_module(f"{__name__}.{rsm}"), rsc)')
    lines.append("        spec = _spec_cache[api_key] = ApiSpec(api_key, name, req, resp, lo, hi, flex, listeners, unstable)")
    lines.append("    return spec")
    lines.append("")
    lines.append("")
    lines.append("def _build() -> dict[int, ApiSpec]:")
    lines.append("    return {key: api_spec(key) for key in _API_TABLE}")
    lines.append("")
    lines.append("")
    lines.append("def __getattr__(name: str) -> Any:")
    lines.append("    global _api_by_key")
    lines.append('    if name == "API_BY_KEY":')
    lines.append("        if _api_by_key is None:")
    lines.append("            _api_by_key = _build()")
    lines.append("        return _api_by_key")
    lines.append("    raise AttributeError(name)")
    return "\n".join(lines) + "\n"


def _constant_name(api_name: str) -> str:
    """Kafka's ApiKeys constant for an API name: "OffsetForLeaderEpoch" -> "OFFSET_FOR_LEADER_EPOCH"."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", api_name).upper()


def gen_api_keys(specs: list[MessageSpec]) -> str:
    """The ``ApiKey`` enum: every API by Kafka's constant name, so code never names one by number."""
    lines = [
        "# generated by shoal.protocol.codegen from the Kafka JSON schemas; do not edit",
        '"""Every Kafka API key by name, as Kafka\'s ``ApiKeys`` enum spells it."""',
        "",
        "from __future__ import annotations",
        "",
        "from enum import IntEnum",
        "",
        "",
        "class ApiKey(IntEnum):",
        '    """A Kafka API key; compares equal to its number on the wire."""',
        "",
    ]
    for r in sorted((s for s in specs if s.type == "request"), key=lambda s: s.api_key):
        lines.append(f"    {_constant_name(r.name[: -len('Request')])} = {r.api_key}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# driver


def generate_all(schemas_dir: Path | None = None) -> dict[str, str]:
    """Map of output file name -> content."""
    specs = load_all(schemas_dir)
    files = {f"{s.module}.py": ModuleGen(s).generate() for s in specs}
    files["__init__.py"] = gen_init(specs)
    files["api_keys.py"] = gen_api_keys(specs)
    return files


def write_all(out_dir: Path, files: dict[str, str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.py"):
        if old.name not in files:
            old.unlink()
    for name, text in sorted(files.items()):
        p = out_dir / name
        if not p.exists() or p.read_text() != text:
            p.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=Path, default=None, help="Kafka JSON schemas dir")
    ap.add_argument("--out", type=Path, default=None, help="output package dir")
    args = ap.parse_args(argv)
    files = generate_all(args.schemas)
    write_all(args.out or default_out_dir(), files)
    print(f"wrote {len(files)} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
