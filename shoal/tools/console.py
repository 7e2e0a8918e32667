"""`shoal produce` and `shoal consume`: kafka-console-producer.sh and kafka-console-consumer.sh.

The producer reads lines (standard input, or ``--file``) as Kafka's
LineMessageReader does: with ``parse.headers=true`` a headers part
(``h1:v1,h2:v2``) before ``headers.delimiter`` (a tab), with ``parse.key=true``
a key before ``key.separator`` (a tab), the rest the value; ``null.marker``
makes a key, value or header value null; a line without a separator is an
error naming the line (or, with ``ignore.error=true``, has no key).

The consumer prints records as Kafka's DefaultMessageFormatter:
``print.timestamp`` (``CreateTime:1700000000000``), ``print.partition``,
``print.offset``, ``print.headers`` (``h:v,...`` or ``NO_HEADERS``),
``print.key``, ``print.value`` (default on), joined by ``key.separator`` and
ended by ``line.separator``, nulls as ``null.literal``. ``--formatter json``
prints one JSON object per record instead. At the end it prints ``Processed a
total of N messages`` on standard error, as Kafka's.
"""

from __future__ import annotations

import base64
import json
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from shoal.tools.wire import ToolError

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def parse_properties(items: Iterable[str], what: str = "property") -> dict[str, str]:
    """``k=v`` items (``--property``, ``--producer-property``) -> dict; escapes ``\\t`` / ``\\n`` as Kafka."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ToolError(f"Invalid {what} {item!r}: expected key=value")
        out[key.strip()] = value.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")
    return out


# ---------------------------------------------------------------- producer
@dataclass
class LineReader:
    """Kafka's LineMessageReader: a line -> (headers, key, value)."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        def flag(name: str) -> bool:
            return props.get(name, "false").strip().lower() == "true"

        r = cls(parse_key=flag("parse.key"), key_separator=props.get("key.separator", "\t"),
                parse_headers=flag("parse.headers"), headers_delimiter=props.get("headers.delimiter", "\t"),
                headers_separator=props.get("headers.separator", ","),
                headers_key_separator=props.get("headers.key.separator", ":"),
                ignore_error=flag("ignore.error"), null_marker=props.get("null.marker"))
        pairs = [("headers.delimiter", r.headers_delimiter, "headers.separator", r.headers_separator),
                 ("headers.delimiter", r.headers_delimiter, "headers.key.separator", r.headers_key_separator),
                 ("headers.separator", r.headers_separator, "headers.key.separator", r.headers_key_separator),
                 ("null.marker", r.null_marker, "key.separator", r.key_separator),
                 ("null.marker", r.null_marker, "headers.separator", r.headers_separator),
                 ("null.marker", r.null_marker, "headers.delimiter", r.headers_delimiter),
                 ("null.marker", r.null_marker, "headers.key.separator", r.headers_key_separator)]
        for a, av, b, bv in pairs:
            if av is not None and av == bv:
                raise ToolError(f"{a} and {b} may not be equal")
        return r

    def _part(self, enabled: bool, line: str, start: int, sep: str, name: str, number: int) -> str | None:
        if not enabled:
            return None
        i = line.find(sep, start)
        if i < 0:
            if self.ignore_error:
                return None
            raise ToolError(f"No {name} found on line number {number}: '{line}'")
        return line[start:i]

    def _null(self, text: str | None) -> bytes | None:
        return None if text is None or text == self.null_marker else text.encode("utf-8")

    def parse(self, line: str, number: int) -> tuple[list[tuple[str, bytes | None]], bytes | None, bytes | None]:
        headers = self._part(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", number)
        h_off = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(self.parse_key, line, h_off, self.key_separator, "key separator", number)
        k_off = 0 if key is None else len(key) + len(self.key_separator)
        value = line[h_off + k_off:]
        out_headers = []
        if headers is not None and headers != self.null_marker:
            for pair in headers.split(self.headers_separator):
                i = pair.find(self.headers_key_separator)
                if i < 0:
                    if self.ignore_error:
                        out_headers.append((pair, None))
                        continue
                    raise ToolError(f"No header key separator found in pair '{pair}' on line number {number}")
                hkey = pair[:i]
                if hkey == self.null_marker:
                    raise ToolError(f"Header keys should not be equal to the null marker '{self.null_marker}' as "
                                    "they can't be null")
                out_headers.append((hkey, self._null(pair[i + len(self.headers_key_separator):])))
        return out_headers, self._null(key), self._null(value)


def producer_config(bootstrap: str, *, acks: str, compression: str | None, linger_ms: int, batch_size: int,
                    request_timeout_ms: int, max_block_ms: int, retries: int | None,
                    extra: dict[str, str]) -> dict[str, Any]:
    cfg: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "console-producer",
                           "acks": "all" if acks in ("-1", "all") else acks, "linger.ms": linger_ms,
                           "batch.size": batch_size, "request.timeout.ms": request_timeout_ms,
                           "max.block.ms": max_block_ms}
    if compression:
        cfg["compression.type"] = compression
    if retries is not None:
        cfg["retries"] = retries
    cfg.update(extra)
    return cfg


def produce_lines(lines: Iterable[str], producer: Any, topic: str, reader: LineReader, *,
                  partition: int | None = None, sync: bool = False,
                  progress: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
    """Send every line; (records sent, error lines). Stops at the first unparsable line (unless
    ``ignore.error``), as Kafka's producer stops."""
    errors: list[str] = []
    sent = 0

    def failed(err: BaseException | None, md: Any) -> None:
        if err is not None:
            errors.append(f"Error when sending message to topic {topic}: {err}")

    for number, raw in enumerate(lines, 1):
        line = raw[:-1] if raw.endswith("\n") else raw
        if line.endswith("\r"):
            line = line[:-1]
        headers, key, value = reader.parse(line, number)
        fut = producer.send(topic, value, key=key, partition=partition, headers=headers or None,
                            on_delivery=failed)
        if sync:
            try:
                fut.get(timeout=producer.config.get("delivery.timeout.ms", 120000) / 1000)
            except Exception as e:  # noqa: BLE001 - reported, as Kafka's ErrorLoggingCallback does
                errors.append(f"Error when sending message to topic {topic}: {e}")
        sent += 1
        if progress is not None:
            progress(sent)
    producer.flush()
    return sent, errors


# ---------------------------------------------------------------- consumer
@dataclass
class Formatter:
    """Kafka's DefaultMessageFormatter (or JSON lines)."""

    print_timestamp: bool = False
    print_key: bool = False
    print_offset: bool = False
    print_partition: bool = False
    print_headers: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"
    json: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str], formatter: str | None) -> Formatter:
        def flag(name: str, default: bool) -> bool:
            return props[name].strip().lower() == "true" if name in props else default

        known = (None, "kafka.tools.DefaultMessageFormatter",
                 "org.apache.kafka.tools.consumer.DefaultMessageFormatter", "json")
        if formatter not in known:
            raise ToolError(f"unknown formatter {formatter!r}: use json or the default")
        return cls(print_timestamp=flag("print.timestamp", False), print_key=flag("print.key", False),
                   print_offset=flag("print.offset", False), print_partition=flag("print.partition", False),
                   print_headers=flag("print.headers", False), print_value=flag("print.value", True),
                   key_separator=props.get("key.separator", "\t").encode(),
                   line_separator=props.get("line.separator", "\n").encode(),
                   headers_separator=props.get("headers.separator", ",").encode(),
                   null_literal=props.get("null.literal", "null").encode(), json=formatter == "json")

    def format(self, r: Any) -> bytes:
        if self.json:
            return (json.dumps(json_record(r), ensure_ascii=False) + "\n").encode("utf-8")
        out = bytearray()
        fields: list[bytes] = []
        if self.print_timestamp:
            fields.append(f"{TIMESTAMP_TYPES.get(r.timestamp_type, 'CreateTime')}:{r.timestamp}".encode()
                          if r.timestamp >= 0 else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(b"Partition:%d" % r.partition)
        if self.print_offset:
            fields.append(b"Offset:%d" % r.offset)
        if self.print_headers:
            fields.append(self.headers_separator.join(
                k.encode() + b":" + (v if v is not None else self.null_literal) for k, v in r.headers)
                if r.headers else b"NO_HEADERS")
        if self.print_key:
            fields.append(r.key if r.key is not None else self.null_literal)
        if self.print_value:
            fields.append(r.value if r.value is not None else self.null_literal)
        if fields:
            out += self.key_separator.join(fields) + self.line_separator
        return bytes(out)


def _text(b: bytes | None, name: str, out: dict[str, Any]) -> None:
    if b is None:
        out[name] = None
        return
    try:
        out[name] = b.decode("utf-8")
    except UnicodeDecodeError:
        out[name] = None
        out[f"{name}_base64"] = base64.b64encode(b).decode()


def json_record(r: Any) -> dict[str, Any]:
    """A record as JSON: text where the bytes are UTF-8, else ``<field>_base64``."""
    out: dict[str, Any] = {"topic": r.topic, "partition": r.partition, "offset": r.offset,
                           "timestamp": r.timestamp,
                           "timestampType": TIMESTAMP_TYPES.get(r.timestamp_type, "CreateTime")}
    _text(r.key, "key", out)
    _text(r.value, "value", out)
    headers = []
    for k, v in r.headers:
        h: dict[str, Any] = {"key": k}
        _text(v, "value", h)
        headers.append(h)
    out["headers"] = headers
    return out


def consumer_config(bootstrap: str, *, group: str | None, from_beginning: bool, isolation_level: str,
                    extra: dict[str, str], assigned: bool) -> dict[str, Any]:
    """As Kafka's console consumer: a random group with auto-commit off when none is given."""
    cfg: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "console-consumer",
                           "isolation.level": isolation_level}
    cfg.update(extra)
    given = {g for g in (group, extra.get("group.id")) if g}
    if len(given) > 1:
        raise ToolError("The group ids provided in different places (directly using '--group', using "
                        "'--consumer-property', or using '--consumer.config') do not match. Detected group ids: "
                        + ", ".join(f"'{g}'" for g in sorted(given)))
    if given and assigned:
        raise ToolError("Options group and partition cannot be specified together.")
    if given:
        cfg["group.id"] = given.pop()
    else:
        if not assigned:
            cfg["group.id"] = f"console-consumer-{random.randrange(100000)}"
        cfg.setdefault("enable.auto.commit", "false")
    reset = cfg.get("auto.offset.reset")
    if reset is not None and from_beginning and reset != "earliest":
        raise ToolError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
                        "to make it work please remove one option")
    cfg.setdefault("auto.offset.reset", "earliest" if from_beginning else "latest")
    return cfg


def parse_offset(text: str) -> int | str:
    t = text.strip().lower()
    if t in ("earliest", "latest"):
        return t
    if t.isdigit():
        return int(t)
    raise ToolError(f"The provided offset value '{text}' is incorrect. Valid values are 'earliest', 'latest', or "
                    "a non-negative long.")


def consume(consumer: Any, out: IO[bytes], formatter: Formatter, *, max_messages: int | None,
            timeout_ms: int | None, skip_errors: bool = False) -> int:
    """Poll and print until ``max_messages`` or ``timeout_ms`` without a record; the count printed."""
    count = 0
    last = time.monotonic()
    while max_messages is None or count < max_messages:
        remaining = None if max_messages is None else max_messages - count
        batch = consumer.poll(200, max_records=remaining)
        records: Iterator[Any] = (r for recs in batch.values() for r in recs)
        got = False
        for r in records:
            got = True
            try:
                out.write(formatter.format(r))
            except (ValueError, TypeError, UnicodeError):
                if not skip_errors:
                    raise
                continue
            count += 1
            if max_messages is not None and count >= max_messages:
                break
        out.flush()
        if got:
            last = time.monotonic()
        elif timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
            break
    return count


def stdout_bytes() -> IO[bytes]:
    return sys.stdout.buffer
