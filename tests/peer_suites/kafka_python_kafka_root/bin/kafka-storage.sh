#!/bin/sh
# Stand-in for Kafka's bin/kafka-storage.sh in a KAFKA_ROOT for kafka-python's own integration
# fixture (test/integration/fixtures.py, KafkaFixture._format_log_dirs), so the suite starts shoal
# (issue #19; see docs/compatibility.md). shoal needs no format step; a SCRAM user given with
# --add-scram 'SCRAM-SHA-n=[name=..,password=..]' is written next to the -c properties file for
# kafka-run-class.sh to create once the broker is up.
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -c) cfg="$2"; shift;;
    --add-scram) out="$2"; shift;;
  esac
  shift
done
[ -n "$out" ] && printf '%s\n' "$out" > "$(dirname "$cfg")/scram-user.txt"
exit 0
