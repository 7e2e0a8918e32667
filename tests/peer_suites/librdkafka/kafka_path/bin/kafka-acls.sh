#!/bin/sh
# KAFKA_PATH stand-in for librdkafka's integration tests (0109, 0115, 0119 via test_kafka_cmd):
# they run "$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server <bootstrap> --add|--remove [--force]
#   --allow-principal|--deny-principal 'User:*' --operation X --allow-host|--deny-host '*' --topic T".
# They pass --bootstrap-server (not --authorizer-properties zookeeper.connect=...), which
# `shoal acls` takes as kafka-acls.sh does, so the flags are passed on unchanged.
# See docs/compatibility.md, "librdkafka's security tests (issue #19)".
exec /work/main/.venv/bin/shoal acls "$@"
