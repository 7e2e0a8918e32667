"""What a sans-IO coordinator shard hands its runtime: responses, records, side effects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from shoal.protocol.generated.api_keys import ApiKey

Record = tuple[bytes, bytes | None]


class ShardRequest(NamedTuple):
    """A request as a shard sees it: who sent it; `token` routes a (possibly delayed) response back."""

    token: Any
    api_key: ApiKey
    api_version: int
    client_id: str = ""
    client_host: str = ""


@dataclass
class AppendBatch:
    """Records appended as one batch; with a producer id they form a transactional batch."""

    records: list[Record] = field(default_factory=list)
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class CoordinatorResult:
    """Responses to send once the batches are appended, in order, to the shard's partition.

    `markers` are transaction markers the runtime must write after the append
    (the transaction coordinator's only IO besides its own log).
    """

    responses: list[tuple[Any, Any]] = field(default_factory=list)
    batches: list[AppendBatch] = field(default_factory=list)
    markers: list[Any] = field(default_factory=list)

    @property
    def records(self) -> list[Record]:
        """Every record of every batch, in append order."""
        return [r for b in self.batches for r in b.records]

    def add_record(self, key: bytes, value: bytes | None, producer_id: int = -1, producer_epoch: int = -1) -> None:
        last = self.batches[-1] if self.batches else None
        if last is None or last.producer_id != producer_id or last.producer_epoch != producer_epoch:
            last = AppendBatch(producer_id=producer_id, producer_epoch=producer_epoch)
            self.batches.append(last)
        last.records.append((key, value))


def int_settings_from_properties(settings: Any, props: dict[str, str]) -> Any:
    """Set each int field of a settings dataclass from its Kafka dotted property name, if given."""
    for name, f in settings.__dataclass_fields__.items():
        dotted = name.replace("_", ".")
        if f.type in (int, "int") and dotted in props:
            setattr(settings, name, int(props[dotted]))
    return settings
