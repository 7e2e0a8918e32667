#!/bin/sh
# Stand-in for Kafka's bin/kafka-topics.sh in a KAFKA_ROOT for kafka-python's own integration
# fixture (issue #19): shoal topics takes Kafka's action flags (--list, --create ...) and
# --command-config.
exec /work/main/.venv/bin/shoal topics "$@"
