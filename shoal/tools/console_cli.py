"""Argument parsing and entry points of `shoal produce` and `shoal consume` (kafka-console-producer and
kafka-console-consumer; the record handling is console.py's). Kept light (argparse only at import), as cli.py."""

from __future__ import annotations

import argparse
import sys

from shoal.tools.cli import DEFAULT_BOOTSTRAP, _run


def _produce(args: argparse.Namespace) -> int:
    from shoal.client import Producer
    from shoal.client.errors import ClientError, KafkaError
    from shoal.tools.console import (
        LineReader,
        parse_properties,
        produce_lines,
        producer_config,
    )
    from shoal.tools.secure_wire import command_config as properties_file
    from shoal.tools.wire import ToolError

    reader = LineReader.from_properties(parse_properties(args.property or []))
    extra = properties_file(args.command_config)  # each file: {} when not given
    extra.update(properties_file(args.producer_config))
    extra.update(parse_properties(args.producer_property or [], "producer property"))
    cfg = producer_config(args.bootstrap_server, acks=args.request_required_acks, compression=args.compression_codec,
                          linger_ms=args.timeout, batch_size=args.batch_size,
                          request_timeout_ms=args.request_timeout_ms, max_block_ms=args.max_block_ms,
                          retries=args.message_send_max_retries, extra=extra)
    try:
        source = open(args.file, encoding="utf-8") if args.file else sys.stdin  # noqa: SIM115 - closed below
    except OSError as e:
        raise ToolError(f"cannot read {args.file}: {e.strerror or e}") from None
    progress = None
    if args.file and sys.stderr.isatty():  # a long file shows how far it got
        last = [0.0]

        def progress(n: int) -> None:
            import time

            now = time.monotonic()
            if now - last[0] >= 1:
                last[0] = now
                print(f"\r{n} records sent", end="", file=sys.stderr, flush=True)
    try:
        producer = Producer(cfg)
    except (KafkaError, ClientError, ValueError) as e:
        raise ToolError(str(e)) from None
    try:
        sent, errors = produce_lines(source, producer, args.topic, reader, partition=args.partition,
                                     sync=args.sync, progress=progress)
    except (KafkaError, ClientError) as e:
        raise ToolError(str(e)) from None
    finally:
        producer.close()
        if source is not sys.stdin:
            source.close()
    if progress is not None:
        print(f"\r{sent} records sent", file=sys.stderr)
    for message in errors[:10]:
        print(message, file=sys.stderr)
    if len(errors) > 10:
        print(f"... and {len(errors) - 10} more errors", file=sys.stderr)
    return 1 if errors else 0


def _consume(args: argparse.Namespace) -> int:
    from shoal.client import Consumer, TopicPartition
    from shoal.client.errors import ClientError, KafkaError
    from shoal.tools.console import (
        Formatter,
        consume,
        consumer_config,
        parse_offset,
        parse_properties,
        stdout_bytes,
    )
    from shoal.tools.secure_wire import command_config as properties_file
    from shoal.tools.wire import ToolError

    if bool(args.topic) == bool(args.include):
        raise ToolError("Exactly one of --include/--topic is required.")
    if args.partition is not None and not args.topic:
        raise ToolError("The topic is required when partition is specified.")
    if args.offset is not None and args.partition is None:
        raise ToolError("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise ToolError("Options from-beginning and offset cannot be specified together.")
    formatter = Formatter.from_properties(parse_properties(args.property or []), args.formatter)
    extra = properties_file(args.command_config)  # each file: {} when not given
    extra.update(properties_file(args.consumer_config))
    extra.update(parse_properties(args.consumer_property or [], "consumer property"))
    cfg = consumer_config(args.bootstrap_server, group=args.group, from_beginning=args.from_beginning,
                          isolation_level=args.isolation_level, extra=extra, assigned=args.partition is not None)
    offset = parse_offset(args.offset) if args.offset is not None else None
    count = 0
    try:
        consumer = Consumer(cfg)
    except (KafkaError, ClientError, ValueError) as e:
        raise ToolError(str(e)) from None
    try:
        if args.partition is not None:
            tp = TopicPartition(args.topic, args.partition)
            consumer.assign([tp])
            if offset == "earliest" or (offset is None and args.from_beginning):
                consumer.seek_to_beginning(tp)
            elif offset == "latest" or offset is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, offset)
        elif args.include:
            consumer.subscribe(pattern=args.include)
        else:
            consumer.subscribe([args.topic])
        try:
            count = consume(consumer, stdout_bytes(), formatter, max_messages=args.max_messages,
                            timeout_ms=args.timeout_ms, skip_errors=args.skip_message_on_error)
        except KeyboardInterrupt:
            pass
    except (KafkaError, ClientError) as e:
        raise ToolError(str(e)) from None
    finally:
        try:
            consumer.close()
        finally:
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def add_console_parsers(sub: argparse._SubParsersAction) -> None:
    """`shoal produce` and `shoal consume` (kafka-console-producer / kafka-console-consumer)."""
    p = sub.add_parser("produce", help="send lines of standard input (or a file) as records "
                                       "(as kafka-console-producer)")
    # Not _add_bootstrap: Kafka's console producer has a --timeout of its own (the linger).
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,HOST:PORT...]")
    p.add_argument("--topic", required=True)
    p.add_argument("--file", default=None, help="read this file instead of standard input")
    p.add_argument("--partition", type=int, default=None, help="send every record to this partition")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="line reader settings: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, null.marker, ignore.error")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE", help="a producer setting")
    p.add_argument("--producer.config", dest="producer_config", default=None, help="a producer properties file")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="a producer properties file (Kafka 4.1's name for --producer.config)")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default=None,
                   choices=("none", "gzip", "snappy", "lz4", "zstd"), help="compression (gzip if given alone)")
    p.add_argument("--request-required-acks", default="-1", help="acks (default -1: all)")
    p.add_argument("--timeout", type=int, default=1000, metavar="MS",
                   help="linger: how long a record may wait for its batch to fill (default 1000)")
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument("--request-timeout-ms", type=int, default=1500)
    p.add_argument("--max-block-ms", type=int, default=60000)
    p.add_argument("--message-send-max-retries", type=int, default=None)
    p.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement")
    p.set_defaults(func=lambda a: _run(_produce, a, "shoal produce"))

    c = sub.add_parser("consume", help="print records (as kafka-console-consumer)")
    c.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,HOST:PORT...]")
    c.add_argument("--topic", default=None)
    c.add_argument("--include", default=None, metavar="REGEX", help="every topic matching this expression")
    c.add_argument("--partition", type=int, default=None, help="read only this partition (no group)")
    c.add_argument("--offset", default=None, help="with --partition: earliest, latest (default) or an offset")
    c.add_argument("--from-beginning", action="store_true", help="start at the earliest offset when there is no "
                                                                  "committed one")
    c.add_argument("--group", default=None, help="the consumer group (default: a random one, nothing committed)")
    c.add_argument("--max-messages", type=int, default=None, help="exit after this many records")
    c.add_argument("--timeout-ms", type=int, default=None, help="exit when no record came for this long")
    c.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"), default="read_uncommitted")
    c.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="formatter settings: print.key, print.value, print.timestamp, print.partition, "
                        "print.offset, print.headers, key.separator, line.separator, headers.separator, "
                        "null.literal")
    c.add_argument("--formatter", default=None, help="json for one JSON object per record (default: Kafka's)")
    c.add_argument("--consumer-property", action="append", metavar="KEY=VALUE", help="a consumer setting")
    c.add_argument("--consumer.config", dest="consumer_config", default=None, help="a consumer properties file")
    c.add_argument("--command-config", default=None, metavar="FILE",
                   help="a consumer properties file (Kafka 4.1's name for --consumer.config)")
    c.add_argument("--skip-message-on-error", action="store_true", help="skip records that cannot be printed")
    c.set_defaults(func=lambda a: _run(_consume, a, "shoal consume"))
