#!/bin/bash
# Runs librdkafka's integration tests (a built checkout's tests/, run by its own run-test.sh)
# against the shoal of shoal-secure.properties with one of the test.conf.* files here.
# docs/compatibility.md, "librdkafka's security tests (issue #19)".
# Usage: run.sh LIBRDKAFKA_DIR CONF_NAME "TESTS" [run-test.sh args...]
#   e.g. run.sh /tmp/lrk plaintext "0081 0109 0115 0119"
#        run.sh /tmp/lrk ssl "0097"            (the SSL_* variables from /tmp/lrk_pki/ssl_env.sh)
# The shell tools (kafka-topics.sh, kafka-acls.sh) of kafka_path/bin/ reach the PLAINTEXT listener.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
LRK=${1:?}; CONF=${2:?}; TESTLIST=${3:?}; shift 3
[ -f "${PKI:-/tmp/lrk_pki}/ssl_env.sh" ] && . "${PKI:-/tmp/lrk_pki}/ssl_env.sh"
cd "$LRK/tests"
export RDKAFKA_TEST_CONF="$HERE/test.conf.$CONF"
# Kafka's client jars for the tests that run Java (0098's TransactionProducerCli: tests/java/Makefile).
export KAFKA_JARS=${KAFKA_JARS:-$HOME/.cache/shoal/kafka/4.4.0/lib}
export KAFKA_PATH="$HERE/kafka_path" BROKERS=127.0.0.1:29400 TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-3.9.0}
export TESTS=$(echo $TESTLIST | tr ' ' ',')
exec ./run-test.sh -D -L -p1 "$@"
