#!/bin/sh
# KAFKA_PATH stand-in for librdkafka's tests/java/run-class.sh (test 0098 runs its Java
# TransactionProducerCli through it): Kafka's client jars from Maven (scripts/kafka.py fetch), in
# $KAFKA_JARS, default Kafka 4.4.0's. See docs/compatibility.md, "librdkafka's test 0098".
exec java -cp "$CLASSPATH:${KAFKA_JARS:-$HOME/.cache/shoal/kafka/4.4.0/lib}/*" "$@"
