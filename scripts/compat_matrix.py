"""Print the compatibility matrix of docs/compatibility.md: each API, the versions Kafka 3.9 and
Kafka 4.x answer (from the JSON schemas in ../shared/kafka-schemas: `validVersions`, and the
`deprecatedVersions` KIP-896 removed in 4.0) and the versions a shoal broker advertises.

    .venv/bin/python scripts/compat_matrix.py
"""

from __future__ import annotations

import tempfile

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
    for spec in sorted((s for s in load_all() if s.type == "request" and s.api_key is not None),
                       key=lambda s: s.api_key):
        if "broker" not in spec.listeners:
            continue  # controller-only and ZooKeeper-era inter-broker APIs: no client reaches them
        lo, hi = spec.valid.lo, spec.valid.hi
        dep = deprecated(spec.source)
        lo4 = dep.hi + 1 if dep is not None and dep.lo == lo else lo
        api = broker.apis.get(spec.api_key)
        ours = fmt(api.min_version, api.max_version) if api else "-"
        unstable = " (unstable, not advertised)" if spec.latest_unstable and lo == hi else ""
        print(f"| {spec.api_key} | {spec.name.removesuffix('Request')}{unstable} | {fmt(lo, hi)} | "
              f"{fmt(lo4, hi)} | {ours} |")


if __name__ == "__main__":
    main()
