#!/bin/sh
# KAFKA_HOME stand-in for confluent-kafka-python's share-consumer callback tests (provision_client_quota runs "$KAFKA_HOME/bin/kafka-configs.sh --bootstrap-server B --alter --add-config|--delete-config X --entity-type clients --entity-name C"); shoal's configs tool takes kafka-configs.sh's flags. docs/compatibility.md, "Share consumers: librdkafka 0170–0178 and confluent-kafka-python (issue #20)".
exec /work/main/.venv/bin/shoal configs "$@"
