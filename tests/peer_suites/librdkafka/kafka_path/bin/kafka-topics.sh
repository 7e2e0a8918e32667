#!/bin/sh
# KAFKA_PATH stand-in for librdkafka's integration tests (tests/test.c test_kafka_topics):
# they run "$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS <kafka-topics flags>".
# shoal's topics tool takes kafka-topics.sh's flags. See docs/compatibility.md, issue #19.
exec /work/main/.venv/bin/shoal topics "$@"
