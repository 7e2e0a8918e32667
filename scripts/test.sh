#!/usr/bin/env bash
# Install everything the tests need (venv, pip packages, kcat, Burrow and a ZooKeeper for it, Apache
# Kafka's jars from Maven Central, the Go and JS client drivers) and run them.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: kcat; Burrow (the lag monitor, an old-protocol client) and the ZooKeeper it
# keeps its own state in.
if ! command -v kcat >/dev/null 2>&1 || [ ! -x /usr/bin/Burrow ] || [ ! -x /usr/share/zookeeper/bin/zkServer.sh ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq kcat burrow zookeeper >/dev/null
    else
        sudo apt-get update -qq && sudo apt-get install -y -qq kcat burrow zookeeper >/dev/null
    fi
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test,spark]'

# The Go and JavaScript clients' drivers (tests/interop/test_go_js_clients.py), built once per machine into
# ~/.cache/shoal: @confluentinc/kafka-javascript compiles its librdkafka (minutes), so in the background
# while the installs below run. A failed build is reported again, with its cause, by the tests.
.venv/bin/python -c "from tests.interop.test_go_js_clients import prebuild; prebuild()" &
drivers=$!

# Apache Kafka, the reference broker, from Maven Central into ~/.cache/shoal/kafka (once per machine).
# A machine that cannot reach Maven Central fails here, naming what it could not fetch.
.venv/bin/python scripts/kafka.py fetch --line 4
.venv/bin/python scripts/kafka.py fetch --line 3.9

# Spark's own Kafka connector (format("kafka"), from Maven in the tests) runs on the PySpark that matches
# it: spark-sql-kafka-0-10 is on Maven Central up to 4.2.0, newer than the venv's PySpark may be.
if [ ! -x .venv-spark-kafka/bin/python ]; then
    python3 -m venv .venv-spark-kafka
fi
.venv-spark-kafka/bin/python -m pip install -q --upgrade pip >/dev/null
.venv-spark-kafka/bin/python -m pip install -q "pyspark==4.2.0" "pyarrow>=18" "numpy>=1.26" "pandas>=2.2,<3" \
    "confluent-kafka>=2.5"

wait "$drivers" || echo "building the Go/JS client drivers failed; tests/interop/test_go_js_clients.py will say why"

.venv/bin/ruff check shoal pyspark_shoal tests bench examples scripts
.venv/bin/mypy shoal/coordinator shoal/broker/security shoal/broker/share shoal/client/security.py shoal/client/sasl_mechanisms.py \
    shoal/sim shoal/clock.py shoal/entropy.py shoal/fileio.py shoal/waits.py shoal/assignors
# Two test processes (pytest-xdist, whole modules per process) on the two cores: the suite is mostly real
# clients, brokers and JVMs waiting on each other, ~30 min here against ~46 in one process.
# SHOAL_TEST_WORKERS=1 runs it in one.
workers=${SHOAL_TEST_WORKERS:-2}
parallel=()
if [ "$workers" -gt 1 ]; then
    parallel=(-n "$workers" --dist loadfile)
fi
# The whole suite (no arguments) also runs 10,000 of the simulator's swarm seeds (issue 21: each draws its
# own mix of clients and faults; shoal/sim/swarm.py) in two processes. They start now at the idle
# scheduling class (chrt; else nice 19), so they take only the CPU the tests leave idle (the tests mostly wait
# on clients, brokers and JVMs), and have both cores once pytest ends. In a session of their own, so that
# the exit trap stops the pool's workers too. The full configuration's seeds run in
# tests/unit/test_sim.py; for more of either: `python -m shoal.sim [--swarm] --seeds 1..100000 --jobs 2`.
sim=
if [ $# -eq 0 ]; then
    if chrt -i 0 true 2>/dev/null; then idle=(chrt -i 0); else idle=(nice -n 19); fi
    sim_out=$(mktemp)
    setsid "${idle[@]}" .venv/bin/python -m shoal.sim --swarm --seeds "1..${SHOAL_SIM_SEEDS:-10000}" --jobs 2 \
        > "$sim_out" 2>&1 &
    sim=$!
    trap 'kill -- -"$sim" 2>/dev/null || true; rm -f "$sim_out"' EXIT
fi
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider "${parallel[@]}" --durations=30 "$@" || status=$?

if [ -n "$sim" ]; then
    sim_status=0
    started=$SECONDS
    wait "$sim" || sim_status=$?
    cat "$sim_out"
    echo "simulator: $((SECONDS - started)) s more after pytest"
    if [ "$status" = 0 ]; then status=$sim_status; fi
fi
exit "$status"
