"""ACLs and the authorization decision, as Kafka's StandardAuthorizer makes it (a pure core).

The model is Kafka's: an `AclBinding` pairs a `ResourcePattern` (resource type, name, LITERAL or
PREFIXED) with an `AccessControlEntry` (principal, host, operation, ALLOW or DENY). `AclStore`
holds the bindings (replayed from the metadata log with `to_record`/`from_record`) and answers
DescribeAcls/CreateAcls/DeleteAcls; `Authorizer` decides one request for one resource.

The decision for (principal, host, operation, resource):
  * a principal listed in `super.users` is allowed everything;
  * the ACLs that apply to the resource are its LITERAL name, the LITERAL wildcard ``*`` and every
    PREFIXED pattern the name starts with;
  * of those, an entry matches when its principal is the caller's or ``User:*``, its host is the
    caller's address or ``*``, and its operation is the one asked, ALL, or (ALLOW entries only)
    one implying it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
    DESCRIBE_CONFIGS;
  * any matching DENY denies; else any matching ALLOW allows; else, when no ACL at all applies to
    the resource, `allow.everyone.if.no.acl.found` decides (default: deny); else deny.

Nothing here does IO or reads a clock: the broker and the simulator drive the same code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_CONFIG = "allow.everyone.if.no.acl.found"


class PatternType(IntEnum):
    """Kafka's resource pattern types; ANY and MATCH exist only in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class PermissionType(IntEnum):
    """Kafka's ACL permission types; ANY exists only in filters."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=IntEnum)


def from_code(enum: type[E], code: int) -> E:
    """The member of one of Kafka's ACL enums for a wire code; an unknown code is UNKNOWN, as in Kafka."""
    try:
        return enum(code)
    except ValueError:
        return enum["UNKNOWN"]


# The operations an ALLOW entry grants besides its own (StandardAuthorizerData.findResult).
_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# AclEntry.supportedOperations: what KIP-430's authorized-operations bit field may report.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal such as ``User:alice``: a type and a name, split at the first colon."""

    principal_type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """Parse ``Type:name``; raises ValueError when there is no colon (Kafka's parseKafkaPrincipal)."""
        principal_type, colon, name = text.partition(":")
        if not colon:
            raise ValueError(f"expected a principal as Type:name, got {text!r}")
        return cls(principal_type, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


@dataclass(frozen=True)
class ResourcePattern:
    """The resources an ACL is about: a type and a LITERAL name (``*`` for all) or a PREFIXED one."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class ResourcePatternFilter:
    """Selects patterns for DescribeAcls/DeleteAcls; None and ANY match anything.

    Pattern type MATCH selects every pattern that applies to the named resource: the LITERAL name,
    the LITERAL wildcard ``*`` and PREFIXED patterns the name starts with (Kafka's
    ResourcePatternFilter.matches); any other pattern type selects that type and the exact name.
    """

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: does the stored pattern apply to the filter's name?
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD)
        return pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(pattern.name)


@dataclass(frozen=True)
class AccessControlEntryFilter:
    """Selects entries; a None principal or host and ANY operation or permission match anything."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission == PermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission in (PermissionType.ANY, entry.permission))


@dataclass(frozen=True)
class AclBindingFilter:
    """A DescribeAcls/DeleteAcls filter; the default matches every binding."""

    pattern: ResourcePatternFilter = field(default_factory=ResourcePatternFilter)
    entry: AccessControlEntryFilter = field(default_factory=AccessControlEntryFilter)

    def is_unknown(self) -> bool:
        return self.pattern.is_unknown() or self.entry.is_unknown()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


@dataclass(frozen=True)
class AclError:
    """Why one ACL creation or one deletion filter failed: Kafka's error code and message."""

    code: ErrorCode
    message: str


@dataclass(frozen=True)
class DeleteFilterResult:
    """One DeleteAcls filter's answer: an error, or the bindings it matched (and so deleted)."""

    error: AclError | None = None
    deleted: tuple[AclBinding, ...] = ()


def validate_new_binding(binding: AclBinding) -> AclError | None:
    """Whether CreateAcls accepts ``binding``: None, or the error Kafka reports for it.

    The checks and their order are AclApis.handleCreateAcls's (cluster name, empty name) then
    AclControlManager.validateNewAcl's; the principal check is shoal's (see `_principal_error`).
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return AclError(ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        return AclError(ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return AclError(ErrorCode.INVALID_REQUEST, f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return AclError(ErrorCode.INVALID_REQUEST, f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return AclError(ErrorCode.INVALID_REQUEST, f"Invalid operation {entry.operation.name}")
    if entry.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        return AclError(ErrorCode.INVALID_REQUEST, f"Invalid permissionType {entry.permission.name}")
    return _principal_error(entry.principal)


def _principal_error(principal: str) -> AclError | None:
    # KRaft's controller stores a principal without a colon and then fails every authorization
    # that meets it; refusing it up front (as the ZooKeeper-era authorizer did) keeps the store sane.
    if ":" not in principal:
        return AclError(ErrorCode.INVALID_REQUEST,
                        f"Invalid principal {principal!r}: expected principalType:principalName")
    return None


def validate_filter(acl_filter: AclBindingFilter) -> AclError | None:
    """Whether a DeleteAcls/DescribeAcls filter is usable (AclControlManager.validateFilter)."""
    if acl_filter.pattern.is_unknown():
        return AclError(ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    if acl_filter.entry.is_unknown():
        return AclError(ErrorCode.INVALID_REQUEST, "Unknown entryFilter.")
    return None


def to_record(binding: AclBinding, op: str = "create") -> dict[str, Any]:
    """A metadata-log record creating (op "create") or deleting (op "delete") one binding.

    Enum fields are Kafka's codes, so the record reads the same whatever shoal's enums become.
    """
    if op not in ("create", "delete"):
        raise ValueError(f"unknown ACL record op {op!r}")
    p, e = binding.pattern, binding.entry
    return {"t": "acl", "op": op, "resource_type": int(p.resource_type), "name": p.name,
            "pattern_type": int(p.pattern_type), "principal": e.principal, "host": e.host,
            "operation": int(e.operation), "permission": int(e.permission)}


def from_record(record: Mapping[str, Any]) -> tuple[str, AclBinding]:
    """The op ("create" or "delete") and binding of a record written by `to_record`."""
    if record.get("t") != "acl" or record.get("op") not in ("create", "delete"):
        raise ValueError(f"not an ACL record: {record!r}")
    pattern = ResourcePattern(from_code(ResourceType, record["resource_type"]), record["name"],
                              from_code(PatternType, record["pattern_type"]))
    entry = AccessControlEntry(record["principal"], record["host"],
                               from_code(AclOperation, record["operation"]),
                               from_code(PermissionType, record["permission"]))
    return record["op"], AclBinding(pattern, entry)


def _kafka_order(bindings: Iterable[AclBinding]) -> list[AclBinding]:
    """Kafka's listing order (StandardAcl.compareTo): resource type, name descending, pattern type,
    operation, principal, host, permission. Built from stable sorts, least significant key first."""
    out = sorted(bindings, key=lambda b: (b.pattern.pattern_type, b.entry.operation, b.entry.principal,
                                          b.entry.host, b.entry.permission))
    out.sort(key=lambda b: b.pattern.name, reverse=True)
    out.sort(key=lambda b: b.pattern.resource_type)
    return out


class AclStore:
    """The cluster's ACLs, indexed for the authorizer: literal names by (type, name), prefixes by type."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._all: set[AclBinding] = set()
        self._literal: dict[ResourceType, dict[str, set[AclBinding]]] = {}
        self._prefixed: dict[ResourceType, dict[str, set[AclBinding]]] = {}
        for binding in bindings:
            self.add(binding)

    def _index(self, pattern: ResourcePattern) -> dict[ResourceType, dict[str, set[AclBinding]]]:
        return self._prefixed if pattern.pattern_type == PatternType.PREFIXED else self._literal

    def add(self, binding: AclBinding) -> bool:
        """Add one binding; False when it was already there (Kafka keeps one copy)."""
        if binding in self._all:
            return False
        self._all.add(binding)
        by_name = self._index(binding.pattern).setdefault(binding.pattern.resource_type, {})
        by_name.setdefault(binding.pattern.name, set()).add(binding)
        return True

    def remove(self, binding: AclBinding) -> bool:
        """Remove one binding; False when it was not there."""
        if binding not in self._all:
            return False
        self._all.discard(binding)
        by_name = self._index(binding.pattern)[binding.pattern.resource_type]
        same = by_name[binding.pattern.name]
        same.discard(binding)
        if not same:
            del by_name[binding.pattern.name]
        return True

    def apply(self, record: Mapping[str, Any]) -> bool:
        """Replay one `to_record` record; whether it changed the store."""
        op, binding = from_record(record)
        return self.add(binding) if op == "create" else self.remove(binding)

    def records(self) -> list[dict[str, Any]]:
        """The store as "create" records in Kafka's order (a snapshot that `apply` replays)."""
        return [to_record(b) for b in self]

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, binding: object) -> bool:
        return binding in self._all

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(_kafka_order(self._all))

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings DescribeAcls returns for ``acl_filter``, in Kafka's order."""
        return _kafka_order(b for b in self._all if acl_filter.matches(b))

    def create(self, bindings: Iterable[AclBinding], *, apply: bool = True
               ) -> tuple[list[AclError | None], list[AclBinding]]:
        """CreateAcls: per binding None (created, or already present) or its error, and the bindings
        that are new (what to log). With apply=False nothing changes (log first, then replay)."""
        errors: list[AclError | None] = []
        new: list[AclBinding] = []
        for binding in bindings:
            error = validate_new_binding(binding)
            errors.append(error)
            if error is None and binding not in self._all and binding not in new:
                new.append(binding)
        if apply:
            for binding in new:
                self.add(binding)
        return errors, new

    def delete(self, filters: Iterable[AclBindingFilter], *, apply: bool = True
               ) -> tuple[list[DeleteFilterResult], list[AclBinding]]:
        """DeleteAcls: per filter its error or every binding it matches, and the bindings removed.

        As in Kafka's controller every filter is matched against the ACLs as they were before the
        request, so a binding two filters match is reported by both and removed once.
        """
        results: list[DeleteFilterResult] = []
        removed: dict[AclBinding, None] = {}
        for acl_filter in filters:
            error = validate_filter(acl_filter)
            if error is not None:
                results.append(DeleteFilterResult(error=error))
                continue
            matched = self.describe(acl_filter)
            removed.update(dict.fromkeys(matched))
            results.append(DeleteFilterResult(deleted=tuple(matched)))
        if apply:
            for binding in removed:
                self.remove(binding)
        return results, list(removed)

    def applicable(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """Every binding whose pattern applies to the resource: its literal name, the literal
        wildcard, and each prefix of the name."""
        literal = self._literal.get(resource_type)
        if literal:
            yield from literal.get(name, ())
            if name != WILDCARD:
                yield from literal.get(WILDCARD, ())
        prefixed = self._prefixed.get(resource_type)
        if not prefixed:
            return
        if len(prefixed) <= len(name):
            # few prefixes: test each against the name
            for prefix, same in prefixed.items():
                if name.startswith(prefix):
                    yield from same
        else:
            # many prefixes: look up each prefix of the name instead
            for end in range(1, len(name) + 1):
                yield from prefixed.get(name[:end], ())

    def of_type(self, resource_type: ResourceType) -> Iterator[AclBinding]:
        """Every binding on a resource type, whatever its pattern."""
        for index in (self._literal, self._prefixed):
            for same in index.get(resource_type, {}).values():
                yield from same


def _entry_matches(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation) -> bool:
    """Whether an entry speaks about this request (StandardAuthorizerData.findResult)."""
    if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
        return False
    if entry.host != WILDCARD and entry.host != host:
        return False
    if entry.operation in (AclOperation.ALL, operation):
        return True
    # implication widens ALLOW entries only: a DENY READ does not deny DESCRIBE
    if entry.permission != PermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return entry.operation in _IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return entry.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons; each must parse as Type:name."""
    users = [v.strip() for v in (value or "").split(";")]
    for user in users:
        if user:
            KafkaPrincipal.parse(user)
    return frozenset(u for u in users if u)


class Authorizer:
    """Kafka's StandardAuthorizer decision over an `AclStore` (see the module docstring).

    ``principal`` is the authenticated principal as ``Type:name`` and ``host`` the client's
    address as text (Java's InetAddress.getHostAddress form, which ACL hosts are compared with).
    """

    def __init__(self, store: AclStore | None = None, *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store = store if store is not None else AclStore()
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    @classmethod
    def from_config(cls, config: Mapping[str, Any], store: AclStore | None = None) -> Authorizer:
        """From broker properties: ``super.users`` and ``allow.everyone.if.no.acl.found``."""
        allow = str(config.get(ALLOW_EVERYONE_CONFIG, "false")).strip().lower() == "true"
        return cls(store, super_users=parse_super_users(config.get(SUPER_USERS_CONFIG)),
                   allow_everyone_if_no_acl_found=allow)

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal`` from ``host`` may perform ``operation`` on the named resource."""
        if principal in self.super_users:
            return True
        found_acl = allowed = False
        for binding in self.store.applicable(resource_type, name):
            found_acl = True
            entry = binding.entry
            if _entry_matches(entry, principal, host, operation):
                if entry.permission != PermissionType.ALLOW:
                    return False
                allowed = True
        if allowed:
            return True
        # the default applies only when no ACL, for anyone, is about this resource
        return not found_acl and self.allow_everyone_if_no_acl_found

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on at least one resource of the type (Kafka's
        Authorizer.authorizeByResourceType, used by InitProducerId's WRITE-on-any-topic fallback).

        Allowed when an ALLOW for the principal (or ``User:*``) and host, with this operation or
        ALL, names the wildcard, or a literal name not denied literally nor by a DENY prefix of it,
        or a prefix no DENY prefix covers; a wildcard DENY denies outright. No operation implies
        another here, as in Kafka.
        """
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or operation in (
                AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"authorize_any needs a concrete type and operation: {resource_type!r} {operation!r}")
        # Kafka first asks about an arbitrary name so super users and the no-ACL default pass
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for binding in self.store.of_type(resource_type):
            entry, pattern = binding.entry, binding.pattern
            if (entry.host not in (host, WILDCARD) or entry.principal not in (principal, WILDCARD_PRINCIPAL)
                    or entry.operation not in (operation, AclOperation.ALL)):
                continue
            if entry.permission == PermissionType.DENY and pattern.pattern_type in deny:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD:
                    return False
                deny[pattern.pattern_type].add(pattern.name)
            elif entry.permission == PermissionType.ALLOW and pattern.pattern_type in allow:
                allow[pattern.pattern_type].add(pattern.name)
        if WILDCARD in allow[PatternType.LITERAL]:
            return True
        denied_prefixes = deny[PatternType.PREFIXED]

        def dominated(name: str) -> bool:
            return any(name[:end] in denied_prefixes for end in range(1, len(name) + 1))

        return (any(n not in deny[PatternType.LITERAL] and not dominated(n) for n in allow[PatternType.LITERAL])
                or any(not dominated(n) for n in allow[PatternType.PREFIXED]))

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field (1 << operation code) of the operations the resource type supports
        that ``principal`` may perform on the resource (AuthHelper.authorizedOperations)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits
