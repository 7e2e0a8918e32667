"""Client quotas: the configured quotas (Kafka's client quota entities) and their enforcement.

Pure: no clock, no I/O. Callers pass the time in.

Configuration (`QuotaStore`) is what AlterClientQuotas writes and DescribeClientQuotas reads:
quota values per entity, an entity being a user, a client id, both, or an IP address, each
named or the default (name None). Validation and messages are Kafka's ClientQuotaControlManager's,
describing is its ClientQuotasImage's. The store keeps the records of the cluster metadata log.

Enforcement (`QuotaEnforcer`) is Kafka's ClientQuotaManager with its default callback:
- the quota that applies to a (user, client id) is found in Kafka's precedence order,
  /config/users/<user>/clients/<client-id>, /users/<user>/clients/<default>, /users/<user>,
  /users/<default>/clients/<client-id>, /users/<default>/clients/<default>, /users/<default>,
  /clients/<client-id>, /clients/<default>; the same choice decides which clients share one
  measured rate (every client of a user quota together, each client id of a client default alone);
- a rate is Kafka's sampled Rate: `quota.window.num` samples of `quota.window.size.seconds`,
  the elapsed time taken as at least (samples - 1) full windows;
- recording past the bound returns the throttle time X that brings the rate back to the bound
  if nothing more is recorded: O * W / (W + X) = T, so X = (O - T) / T * W (rounded); request
  time quotas cap it at one window, byte rate quotas do not (as Kafka).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from shoal.protocol.errors import ErrorCode, Refusal

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"  # kept and described, not enforced
CONNECTION_CREATION_RATE = "connection_creation_rate"  # (ip entities) kept and described, not enforced

# The quotas enforced per (user, client id)
ENFORCED = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)

_LONG, _INT, _DOUBLE = "LONG", "INT", "DOUBLE"
_USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: _LONG, CONSUMER_BYTE_RATE: _LONG, REQUEST_PERCENTAGE: _DOUBLE,
                     CONTROLLER_MUTATION_RATE: _DOUBLE}
_IP_KEYS = {CONNECTION_CREATION_RATE: _INT}
_LONG_MAX = 9223372036854775807
_INT_MAX = 2147483647

# DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# An entity: (type, name) pairs sorted by type; a None name is the type's default.
Entity = tuple[tuple[str, str | None], ...]


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity from its (type, name) pairs (a type given twice keeps its last name, as Kafka's map)."""
    return tuple(sorted(dict(pairs).items()))


# -- Java's HashMap iteration order (Kafka prints and returns entities in it) -------------------

def _java_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as an unsigned 32-bit value."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_map_order(keys: list[str], initial_capacity: int | None = None) -> list[str]:
    """``keys`` (distinct, in insertion order) in the order a java.util.HashMap created with
    ``initial_capacity`` (default: len(keys)) iterates them."""
    n = max(1, len(keys) if initial_capacity is None else initial_capacity)
    cap = 1
    while cap < n:
        cap *= 2
    for size in range(1, len(keys) + 1):
        if size > int(cap * 0.75):
            cap *= 2

    def bucket(key: str) -> int:
        h = _java_hash(key)
        return (h ^ (h >> 16)) & (cap - 1)

    return sorted(keys, key=bucket)  # stable: one bucket keeps insertion order


def entity_str(pairs: list[tuple[str, str | None]]) -> str:
    """Kafka's ClientQuotaEntity.toString for an entity given as the request's (type, name) pairs."""
    names = dict(pairs)
    order = java_map_order(list(names), len(pairs))
    inner = ", ".join(f"{t}={'null' if names[t] is None else names[t]}" for t in order)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def entity_pairs(entity: Entity) -> list[tuple[str, str | None]]:
    """The entity's (type, name) pairs in the order Kafka's metadata image returns them."""
    names = dict(entity)
    return [(t, names[t]) for t in java_map_order(list(names), 2)]


# -- configuration ----------------------------------------------------------------------------

@dataclass(frozen=True)
class AlterResult:
    pairs: list[tuple[str, str | None]]  # the entity as the request named it
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


QuotaFilterError = Refusal  # a DescribeClientQuotas filter Kafka refuses


class QuotaStore:
    """Every entity's quota values, kept as the metadata log's ``quota`` records."""

    def __init__(self) -> None:
        self._values: dict[Entity, dict[str, float]] = {}
        # per enforced key: (user key, client key) -> value; a user/client key is None when the
        # entity has no such component, DEFAULT for the default, else the name
        self._by_key: dict[str, dict[tuple[str | None, str | None], float]] = {k: {} for k in ENFORCED}
        self._enforced: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return sum(len(v) for v in self._values.values())

    def values(self, entity: Entity) -> dict[str, float]:
        return dict(self._values.get(entity, {}))

    @property
    def enforced(self) -> frozenset[str]:
        """The enforced quota keys some entity sets (empty: nothing to measure)."""
        return self._enforced

    # -- the metadata log -----------------------------------------------------------------
    def apply(self, record: dict[str, Any]) -> None:
        """Replay one ``quota`` record: {"entity": [[type, name], ...], "key", "value"} or "remove"."""
        entity = entity_of((t, n) for t, n in record["entity"])
        key = record["key"]
        values = self._values.setdefault(entity, {})
        if record.get("remove"):
            values.pop(key, None)
            if not values:
                del self._values[entity]
        else:
            values[key] = float(record["value"])
        if key in self._by_key:
            index = _index_key(entity)
            if index is not None:
                if record.get("remove"):
                    self._by_key[key].pop(index, None)
                else:
                    self._by_key[key][index] = float(record["value"])
                self._enforced = frozenset(k for k, v in self._by_key.items() if v)

    def snapshot(self) -> Iterator[dict[str, Any]]:
        for entity, values in sorted(self._values.items(), key=lambda e: repr(e[0])):
            for key, value in sorted(values.items()):
                yield _record(entity, key, value)

    # -- AlterClientQuotas ----------------------------------------------------------------
    def alter(self, alterations: list[tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]]
              ) -> tuple[list[AlterResult], list[dict[str, Any]]]:
        """Validate a request as Kafka's controller does: each entity's result (one per distinct
        entity, in request order) and the records to write (the caller writes and applies them,
        or not at all for validate_only). ``alterations``: (entity pairs, [(key, value or None to
        remove)]) per request entry."""
        results: dict[Entity, AlterResult] = {}
        records: list[dict[str, Any]] = []
        for pairs, ops in alterations:
            entity = entity_of(pairs)
            alter: dict[str, float | None] = {}
            failed = False
            for key, value in ops:
                if key in alter:
                    failed = True
                    results[entity] = AlterResult(pairs, ErrorCode.INVALID_REQUEST,
                                                  f"Duplicate quota key {key} not updating quota for this entity "
                                                  f"{entity_str(pairs)}")
                else:
                    alter[key] = value
            if failed or entity in results:
                results[entity] = AlterResult(pairs, ErrorCode.INVALID_REQUEST,
                                              f"Ignoring duplicate entity {entity_str(pairs)}")
                continue
            results[entity] = self._alter_entity(pairs, entity, alter, records)
        return list(results.values()), records

    def _alter_entity(self, pairs: list[tuple[str, str | None]], entity: Entity, alter: dict[str, float | None],
                      records: list[dict[str, Any]]) -> AlterResult:
        def fail(message: str) -> AlterResult:
            return AlterResult(pairs, ErrorCode.INVALID_REQUEST, message)

        if not entity:
            return fail("Invalid empty client quota entity")
        seen: set[str] = set()
        names = dict(pairs)
        for entity_type in java_map_order(list(names), len(pairs)):
            name = names[entity_type]
            if entity_type in seen:
                return fail(f"Invalid client quota entity, duplicate entity entry {entity_type}")
            seen.add(entity_type)
            if entity_type not in (USER, CLIENT_ID, IP):
                return fail(f"Unhandled client quota entity type: {entity_type}")
            if name is not None and not name:
                return fail(f"Empty {entity_type} not supported")
        if IP in names:
            if USER in names or CLIENT_ID in names:
                # sic: Kafka's message has no space there
                return fail("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
            ip = names[IP]
            if ip is not None and not _valid_ip(ip):
                return fail(f"{ip} is not a valid IP or resolvable host.")
            valid_keys = _IP_KEYS
        else:
            valid_keys = _USER_CLIENT_KEYS
        current = self._values.get(entity, {})
        new: list[dict[str, Any]] = []
        for key in java_map_order(list(alter)):
            value = alter[key]
            if value is None:
                if key in current:
                    new.append(_record(entity, key, None))
                continue
            error = _validate_value(valid_keys, key, value)
            if error is not None:
                return fail(error)
            if current.get(key) != value:
                new.append(_record(entity, key, value))
        records.extend(new)
        return AlterResult(pairs)

    # -- DescribeClientQuotas -------------------------------------------------------------
    def describe(self, components: list[tuple[str, int, str | None]], strict: bool
                 ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities a filter matches, with their values; raises Refusal as Kafka refuses
        a filter. ``components``: (entity type, match type, match)."""
        exact, typed = _parse_filter(components)
        out = []
        for entity, values in self._values.items():
            names = dict(entity)
            if strict and len(names) != len(exact) + len(typed):
                continue
            if any(t not in names or names[t] != m for t, m in exact.items()):
                continue
            if any(t not in names for t in typed):
                continue
            out.append((entity, dict(values)))
        return out

    # -- what applies to a client -----------------------------------------------------------
    def metric_tags(self, key: str, user: str, client_id: str) -> tuple[str, str]:
        """Which measured rate a client's ``key`` usage goes to (Kafka's quotaMetricTags): its
        (user tag, client-id tag), "" where the quota does not distinguish."""
        q = self._by_key[key]
        if (user, client_id) in q or (user, DEFAULT) in q:
            return user, client_id
        if (user, None) in q:
            return user, ""
        if (DEFAULT, client_id) in q or (DEFAULT, DEFAULT) in q:
            return user, client_id
        if (DEFAULT, None) in q:
            return user, ""
        return "", client_id

    def limit(self, key: str, tags: tuple[str, str]) -> float | None:
        """The quota of the rate with these tags (Kafka's quotaLimit), or None."""
        q = self._by_key[key]
        user, client_id = tags
        if user and client_id:
            order: tuple[tuple[str | None, str | None], ...] = (
                (user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT))
        elif user:
            order = ((user, None), (DEFAULT, None))
        elif client_id:
            order = ((None, client_id), (None, DEFAULT))
        else:
            return None
        for k in order:
            if k in q:
                return q[k]
        return None


def _parse_filter(components: list[tuple[str, int, str | None]]) -> tuple[dict[str, str | None], set[str]]:
    """A DescribeClientQuotas filter as Kafka's ClientQuotasImage reads it: exact names (None: the
    default) and types any entity of which matches."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise Refusal(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in typed:
            raise Refusal(ErrorCode.INVALID_REQUEST,
                                   f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in (IP, USER, CLIENT_ID):
            raise Refusal(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise Refusal(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise Refusal(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise Refusal(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(entity_type)
        else:
            raise Refusal(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    if (IP in exact or IP in typed) and (USER in exact or USER in typed or CLIENT_ID in exact
                                        or CLIENT_ID in typed):
        raise Refusal(ErrorCode.INVALID_REQUEST,
                               "Invalid entity filter component combination. IP filter component should not be "
                               "used with user or clientId filter component.")
    return exact, typed


# The default name in the lookup index (a real name is a non-empty string; "" never is one)
DEFAULT = ""


def _index_key(entity: Entity) -> tuple[str | None, str | None] | None:
    names = dict(entity)
    if IP in names or not names:
        return None
    user: str | None = None
    client: str | None = None
    if USER in names:
        user = DEFAULT if names[USER] is None else names[USER]
    if CLIENT_ID in names:
        client = DEFAULT if names[CLIENT_ID] is None else names[CLIENT_ID]
    return user, client


def _record(entity: Entity, key: str, value: float | None) -> dict[str, Any]:
    record: dict[str, Any] = {"t": "quota", "entity": [[t, n] for t, n in entity], "key": key}
    if value is None:
        record["remove"] = True
    else:
        record["value"] = value
    return record


def _valid_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _validate_value(valid_keys: dict[str, str], key: str, value: float) -> str | None:
    kind = valid_keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == _DOUBLE:
        return None
    if kind == _INT and value > _INT_MAX:
        return f"Proposed value for {key} is too large for an INT."
    if kind == _LONG and value > float(_LONG_MAX):
        return f"Proposed value for {key} is too large for a LONG."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


# -- enforcement --------------------------------------------------------------------------------

class Rate:
    """Kafka's Rate over a WindowedSum: ``samples`` samples of ``window_ms`` each (per second)."""

    __slots__ = ("_current", "_samples", "last_record_ms", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        # each sample: [start_ms, last_event_ms, value]
        self._samples: list[list[float]] = []
        self._current = 0
        self.last_record_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        if not self._samples:
            self._samples.append([now_ms, now_ms, 0.0])
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = [now_ms, now_ms, 0.0]
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample[0], sample[1], sample[2] = now_ms, now_ms, 0.0
        sample[2] += value
        sample[1] = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample[1] >= expire:
                sample[0], sample[1], sample[2] = now_ms, now_ms, 0.0

    def window_size(self, now_ms: int) -> int:
        """The elapsed time the rate divides by: at least (samples - 1) full windows."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append([now_ms, now_ms, 0.0])
        elapsed = int(now_ms - min(s[0] for s in self._samples))
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(s[2] for s in self._samples)
        return total / (self.window_size(now_ms) / 1000.0)


def _java_round(x: float) -> int:
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


class QuotaEnforcer:
    """The measured rates of every (quota, user tag, client-id tag) and their throttle times."""

    # A rate nobody recorded into for this long is dropped (Kafka expires its quota sensors after an hour)
    EXPIRE_MS = 3_600_000

    def __init__(self, store: QuotaStore, samples: int = 11, window_seconds: int = 1) -> None:
        self.store = store
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self._rates: dict[tuple[str, str, str], Rate] = {}
        self._swept_ms = 0

    def _rate(self, key: str, tags: tuple[str, str], now_ms: int) -> Rate:
        if now_ms - self._swept_ms >= 60_000:
            self._swept_ms = now_ms
            for k in [k for k, r in self._rates.items() if now_ms - r.last_record_ms >= self.EXPIRE_MS]:
                del self._rates[k]
        rate = self._rates.get((key, *tags))
        if rate is None:
            rate = self._rates[(key, *tags)] = Rate(self.samples, self.window_ms)
        return rate

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes, or percent-seconds of request time) for the client; the throttle
        time in ms its quota now asks for (0 when within it or when no quota applies)."""
        tags = self.store.metric_tags(key, user, client_id)
        bound = self.store.limit(key, tags)
        if bound is None:
            return 0
        rate = self._rate(key, tags, now_ms)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = _java_round((observed - bound) / bound * rate.window_size(now_ms))
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, self.window_ms)
        return min(throttle, _INT_MAX)

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch returns no data, so its bytes do not count)."""
        tags = self.store.metric_tags(key, user, client_id)
        if self.store.limit(key, tags) is not None:
            self._rate(key, tags, now_ms).record(-value, now_ms)

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """The most one request may take without a certain throttle (bounds a fetch's bytes), or None."""
        bound = self.store.limit(key, self.store.metric_tags(key, user, client_id))
        if bound is None:
            return None
        return bound * (self.samples - 1) * (self.window_ms / 1000)


def request_percentage(seconds: float) -> float:
    """Request handling time as Kafka's request quota records it (percent of one thread, per second)."""
    return seconds * 100.0


def quota_user(principal: str) -> str:
    """The user a principal's quotas go by: its name ("User:alice" -> "alice")."""
    return principal.split(":", 1)[1] if ":" in principal else principal
