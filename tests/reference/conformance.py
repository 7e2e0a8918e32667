"""Differential conformance over raw sockets: the corpus against shoal and Apache Kafka.

For every case of :mod:`tests.reference.conformance_corpus` and every version of
its API that both brokers advertise (and shoal's codec knows), the same request
bytes go to both brokers; the decoded answers are compared field by field and
classed *identical*, *equal after normalising* (only fields that legitimately
differ, such as node ids or generated member ids, differ) or *different*.

Run by hand::

    python -m tests.reference.conformance --shoal HOST:PORT --kafka HOST:PORT [--write-docs]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.protocol.errors import UnsupportedVersionError
from shoal.protocol.generated import api_spec
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest as CT
from shoal.protocol.generated.describe_groups_request import DescribeGroupsRequest
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.generated.produce_request import ProduceRequest as PR
from shoal.protocol.record_encode import build_batch
from shoal.tools.wire import BrokerConnection, ToolError, parse_bootstrap
from tests.reference.conformance_corpus import CASES, DEFAULT_IGNORED, Case, Names

IDENTICAL, NORMALISED, DIFFERENT = "identical", "equal after normalising", "different"
DOCS_HEADING = "## Differential conformance against Apache Kafka"
_UNSUPPORTED_FIELD = re.compile(r"field (\w+)\.(\w+) is not supported")


@dataclass
class Outcome:
    """One (case, version) comparison."""

    case: str
    api_key: int
    version: int
    verdict: str
    diffs: list[str] = field(default_factory=list)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _reset_field(obj: Any, cls_name: str, attr: str) -> bool:
    """Reset ``attr`` to its default on every struct named ``cls_name`` inside ``obj``."""
    done = False
    if isinstance(obj, list):
        return any([_reset_field(x, cls_name, attr) for x in obj])
    fields = getattr(obj, "_FIELDS", None)
    if fields is None:
        return False
    if type(obj).__name__ == cls_name and attr in fields:
        setattr(obj, attr, getattr(type(obj)(), attr))
        done = True
    for f in fields:
        done = _reset_field(getattr(obj, f), cls_name, attr) or done
    return done


def encode_for(request: Any, version: int) -> bytes | None:
    """The request at ``version``; fields the version lacks are reset to their defaults.

    None when the template cannot be expressed at this version (a needed field is absent).
    """
    for _ in range(20):
        try:
            return request.encode(version)
        except UnsupportedVersionError as e:
            m = _UNSUPPORTED_FIELD.search(str(e))
            if not m or not _reset_field(request, m.group(1), _snake(m.group(2))):
                return None
    return None


def to_plain(obj: Any) -> Any:
    """A decoded message as nested dicts/lists of plain values."""
    if isinstance(obj, list):
        return [to_plain(x) for x in obj]
    fields = getattr(obj, "_FIELDS", None)
    if fields is not None:
        return {f: to_plain(getattr(obj, f)) for f in fields}
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    if isinstance(obj, uuid.UUID):
        return str(obj)
    return obj


def normalise(value: Any, ignored: frozenset[str], unordered: bool) -> Any:
    """Blank ignored fields; sort lists whose order Kafka does not promise."""
    if isinstance(value, dict):
        return {k: ("<ignored>" if k in ignored else normalise(v, ignored, unordered)) for k, v in value.items()}
    if isinstance(value, list):
        items = [normalise(x, ignored, unordered) for x in value]
        return sorted(items, key=repr) if unordered else items
    return value


def _named(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in items)


def diff_paths(a: Any, b: Any, path: str = "") -> list[str]:
    """Field paths where ``a`` (shoal) and ``b`` (Kafka) differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in a.keys() | b.keys():
            out += diff_paths(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    if isinstance(a, list) and isinstance(b, list) and _named(a) and _named(b):
        # Lists of named entries (topics, configs) are diffed by name, so one missing entry
        # shows as one line rather than as every entry after it.
        return diff_paths({x["name"]: x for x in a}, {x["name"]: x for x in b}, path)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff_paths(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: shoal={a!r} kafka={b!r}"]


def connect(bootstrap: str) -> BrokerConnection:
    """A raw connection to the first bootstrap server."""
    host, port = parse_bootstrap(bootstrap)[0]
    return BrokerConnection(host, port, timeout=30.0, client_id="shoal-conformance")


def setup(conn: BrokerConnection, names: Names) -> None:
    """The state the corpus needs: a topic with 3 partitions and 3 records in partition 0."""
    req = CT(topics=[CT.CreatableTopic(name=names["topic"], num_partitions=3, replication_factor=1)],
             timeout_ms=10000)
    resp = conn.send(req)
    if resp.topics[0].error_code not in (0, 36):
        raise RuntimeError(f"cannot create {names['topic']}: error {resp.topics[0].error_code}")
    batch = build_batch([(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i, None) for i in range(3)])
    produce = PR(acks=-1, timeout_ms=10000, topic_data=[PR.TopicProduceData(
        name=names["topic"], partition_data=[PR.PartitionProduceData(index=0, records=batch)])])
    for _ in range(50):  # a fresh topic's leader may take a moment to be ready on Kafka
        resp = conn.send(produce, 8)
        if resp.responses[0].partition_responses[0].error_code == 0:
            return
        time.sleep(0.2)
    raise RuntimeError("cannot produce the setup records")


def _first_error(resp: Any) -> int:
    for attr in ("groups", "coordinators"):
        if hasattr(resp, attr):
            return getattr(resp, attr)[0].error_code
    return resp.error_code


def warm_up(conn: BrokerConnection, names: Names) -> None:
    """Wait until the group and transaction coordinators answer.

    A fresh Kafka creates ``__consumer_offsets`` and ``__transaction_state`` on first use and
    answers COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS meanwhile;
    comparing those transient answers would say nothing about either broker.
    """
    transient = {14, 15, 16}
    # FindCoordinator first, as a client would: both brokers create the internal topics on it.
    probes = [FindCoordinatorRequest(key_type=0, coordinator_keys=[names["group"] + "-warm"]),
              FindCoordinatorRequest(key_type=1, coordinator_keys=[names["group"] + "-txn"]),
              DescribeGroupsRequest(groups=[names["group"] + "-warm"]),
              InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)]
    for probe in probes:
        for _ in range(150):
            resp = conn.send(probe, 4) if isinstance(probe, FindCoordinatorRequest) else conn.send(probe)
            code = _first_error(resp)
            if code not in transient:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{conn.host}:{conn.port}: coordinator not ready (error {code})")


def shared_versions(api_key: int, a: BrokerConnection, b: BrokerConnection) -> range:
    """Versions of ``api_key`` that both brokers advertise and shoal's codec knows."""
    spec = api_spec(api_key)
    ra, rb = a.api_versions.get(api_key), b.api_versions.get(api_key)
    if ra is None or rb is None:
        return range(0)
    return range(max(ra[0], rb[0], spec.min_version), min(ra[1], rb[1], spec.max_version) + 1)


def _ask(conn: BrokerConnection, case: Case, names: Names, version: int) -> Any:
    body = encode_for(case.build(names, version), version)
    if body is None:
        return None
    try:
        raw = conn._roundtrip(case.api_key, version, body)
    except ToolError as e:
        # a broker that drops the connection has answered too: compare that, not a traceback
        return {"<no answer>": "closed" if "closed" in str(e) else str(e)}
    return to_plain(api_spec(case.api_key).response.decode(raw, version))


def compare(case: Case, version: int, shoal: Any, kafka: Any) -> Outcome:
    """Classify one pair of decoded answers."""
    if shoal == kafka:
        return Outcome(case.name, case.api_key, version, IDENTICAL)
    ignored = DEFAULT_IGNORED | case.ignore
    ns, nk = normalise(shoal, ignored, case.unordered), normalise(kafka, ignored, case.unordered)
    if ns == nk:
        return Outcome(case.name, case.api_key, version, NORMALISED)
    return Outcome(case.name, case.api_key, version, DIFFERENT, sorted(diff_paths(ns, nk)))


def run(shoal_bootstrap: str, kafka_bootstrap: str, run_id: str | None = None) -> list[Outcome]:
    """Run the whole corpus against both brokers; one outcome per (case, version)."""
    run_id = run_id or uuid.uuid4().hex[:8]
    names = {"topic": f"conf-{run_id}-t3", "missing": f"conf-{run_id}-missing", "new": f"conf-{run_id}-new",
             "group": f"conf-{run_id}-g"}
    s, k = connect(shoal_bootstrap), connect(kafka_bootstrap)
    try:
        for conn in (s, k):
            setup(conn, names)
            warm_up(conn, names)
        outcomes = []
        for case in CASES:
            for v in shared_versions(case.api_key, s, k):
                if not case.min_version <= v <= case.max_version:
                    continue
                a, b = _ask(s, case, names, v), _ask(k, case, names, v)
                if isinstance(a, dict) and "<no answer>" in a:
                    s.close()
                    s = connect(shoal_bootstrap)
                if isinstance(b, dict) and "<no answer>" in b:
                    k.close()
                    k = connect(kafka_bootstrap)
                if a is not None and b is not None:
                    outcomes.append(compare(case, v, a, b))
        return outcomes
    finally:
        s.close()
        k.close()


def totals(outcomes: list[Outcome]) -> Counter[str]:
    """How many comparisons fell in each class."""
    return Counter(o.verdict for o in outcomes)


def summary(outcomes: list[Outcome]) -> str:
    """The one-line totals."""
    t = totals(outcomes)
    return (f"requests compared: {len(outcomes)}, identical: {t[IDENTICAL]}, "
            f"equal after normalising: {t[NORMALISED]}, different: {t[DIFFERENT]}")


def docs_section(outcomes: list[Outcome], reasons: dict[str, str]) -> str:
    """The generated docs section: totals, a per-case table, and every difference with its reason."""
    lines = [DOCS_HEADING, "",
             "Generated by `python -m tests.reference.conformance --shoal HOST:PORT --kafka HOST:PORT "
             "--write-docs` (shoal vs Apache Kafka 4.4.0, one node each, raw sockets, shoal's codec).", "",
             summary(outcomes) + ".", "", "| case | API key | versions | identical | normalised | different |",
             "|---|---|---|---|---|---|"]
    by_case: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_case.setdefault(o.case, []).append(o)
    for name, outs in by_case.items():
        c = Counter(o.verdict for o in outs)
        vs = f"{outs[0].version}-{outs[-1].version}"
        lines.append(f"| {name} | {outs[0].api_key} | {vs} | {c[IDENTICAL]} | {c[NORMALISED]} | {c[DIFFERENT]} |")
    diffs = [o for o in outcomes if o.verdict == DIFFERENT]
    lines += ["", "Differences (each with its reason):", ""]
    for o in diffs:
        lines.append(f"- `{o.case}` v{o.version}: {'; '.join(o.diffs)} — "
                     f"{reasons.get(o.case, 'not yet explained (a shoal bug to fix)')}")
    if not diffs:
        lines.append("- none")
    # the run's unique names would make every regeneration a diff
    return re.sub(r"conf-[0-9a-f]{8}-", "conf-<run>-", "\n".join(lines) + "\n")


def write_docs(section: str, path: Path = Path("docs/compatibility.md")) -> None:
    """Replace (or append) this run's section of docs/compatibility.md, leaving the others alone."""
    text = path.read_text()
    start = text.find(DOCS_HEADING)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = text.find("\n## ", start + len(DOCS_HEADING))
        text = text[:start] + section + ("\n" + text[nxt + 1:] if nxt >= 0 else "")
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Command line: run the corpus, print totals and differences, optionally write the docs."""
    from tests.reference.conformance_allowlist import ALLOWED

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shoal", required=True)
    p.add_argument("--kafka", required=True)
    p.add_argument("--write-docs", action="store_true")
    args = p.parse_args(argv)
    outcomes = run(args.shoal, args.kafka)
    for o in outcomes:
        if o.verdict == DIFFERENT:
            print(f"DIFFERENT {o.case} v{o.version}: {'; '.join(o.diffs)}")
    print(summary(outcomes))
    if args.write_docs:
        write_docs(docs_section(outcomes, ALLOWED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
