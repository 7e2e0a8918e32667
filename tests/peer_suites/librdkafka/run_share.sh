#!/bin/bash
# Runs librdkafka's share-consumer integration tests (0170-0178) against a 3-node shoal on 127.0.0.1:29500 (docs/compatibility.md, "Share consumers: librdkafka 0170–0178 and confluent-kafka-python (issue #20)").
# Usage: run_share.sh LIBRDKAFKA_DIR "TESTS" [run-test.sh args...]   e.g. run_share.sh /tmp/lrk "0170 0171"
# The shoal (as trivup's default scenario plus the share settings of librdkafka's tests/cluster_testing.py for Kafka >= 4.2):
#   shoal serve --nodes 3 --override listeners=PLAINTEXT://127.0.0.1:29500 --override num.partitions=4 \
#     --override default.replication.factor=3 --override auto.create.topics.enable=true \
#     --override share.coordinator.state.topic.replication.factor=3 --override share.coordinator.state.topic.min.isr=2 \
#     --override group.share.min.record.lock.duration.ms=1000 \
#     --override transaction.state.log.replication.factor=3 --override transaction.state.log.min.isr=2
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
LRK=${1:?}; TESTLIST=${2:?}; shift 2
cd "$LRK/tests"
export RDKAFKA_TEST_CONF="$HERE/test.conf.share"
export KAFKA_PATH="$HERE/kafka_path" BROKERS=127.0.0.1:29500 TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-4.4.0}
export TESTS=$(echo $TESTLIST | tr ' ' ',')
exec ./run-test.sh -D -L -p1 "$@"
