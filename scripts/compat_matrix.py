"""Print the compatibility matrix of docs/compatibility.md: each API, the versions Kafka 3.9 and
Kafka 4.x answer (from the JSON schemas in ../shared/kafka-schemas: `validVersions`, and the
`deprecatedVersions` KIP-896 removed in 4.0; for Kafka 4.x, the newer definitions in
shoal/protocol/schemas where there are) and the versions a shoal broker advertises.

    .venv/bin/python scripts/compat_matrix.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from shoal.broker.broker import Broker
from shoal.broker.config import BrokerConfig
from shoal.protocol.codegen import VersionRange, default_schemas_dir, load_all, strip_comments


def deprecated(spec_source: str) -> VersionRange | None:
    import json

    text = (default_schemas_dir() / spec_source).read_text()
    value = json.loads(strip_comments(text)).get("deprecatedVersions")
    return VersionRange.parse(value) if value else None


def fmt(lo: int, hi: int) -> str:
    return "-" if lo > hi else (f"{lo}" if lo == hi else f"{lo}-{hi}")


def main() -> None:
    broker = Broker(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": tempfile.mkdtemp()}), 1)
    print("| key | API | Kafka 3.9 | Kafka 4.x | shoal |")
    print("|---|---|---|---|---|")
    shared = {s.name: s for s in load_all(overlay_dir=Path(tempfile.mkdtemp()))}  # the 2024 files alone
    for spec in sorted((s for s in load_all() if s.type == "request" and s.api_key is not None),
                       key=lambda s: s.api_key):
        if "broker" not in spec.listeners:
            continue  # controller-only and ZooKeeper-era inter-broker APIs: no client reaches them
        old = shared.get(spec.name)
        api = broker.apis.get(spec.api_key)
        ours = fmt(api.min_version, api.max_version) if api else "-"
        if old is not None and old.source == spec.source:
            lo, hi = spec.valid.lo, spec.valid.hi
            dep = deprecated(spec.source)
            lo4 = dep.hi + 1 if dep is not None and dep.lo == lo else lo
            unstable = " (unstable, not advertised)" if spec.latest_unstable and lo == hi else ""
            v39, v4 = fmt(lo, hi), fmt(lo4, hi)
        else:  # a Kafka 4.x definition (shoal/protocol/schemas): Kafka 3.9 had it unstable or not at all
            unstable = ""
            v39 = f"{fmt(old.valid.lo, old.valid.hi)} (unstable)" if old is not None else "-"
            v4 = fmt(spec.valid.lo, spec.valid.hi)
        print(f"| {spec.api_key} | {spec.name.removesuffix('Request')}{unstable} | {v39} | {v4} | {ours} |")


if __name__ == "__main__":
    main()
