"""What each API asks the authorizer, on which resource, and what a denial does (Kafka's KafkaApis).

`API_ACCESS[api_key]` lists an API's checks in the order Kafka makes them. A `Check` is allowed
when any of its `grants` is (in order: Kafka asks the cheap cluster-wide question first and the
per-resource one only when that fails); when it is denied, `on_deny` says what the response shows:

  * REQUEST: the whole request fails with `error` (Kafka's getErrorResponse: the top-level error,
    or that error in every entry of the response);
  * RESOURCE: only the entries naming the denied resource carry `error`; the rest go on;
  * OMIT: the denied resources silently drop out of the response (a listing never reveals them);
  * FIELD: nothing fails; one field of the answer is withheld (`note` says which).

`when` gives the condition under which Kafka makes a check at all (e.g. only transactional
produce checks the transactional id). A grant's `target` says which name to authorize: see
`Target`. Config resources and coordinator keys map to ACL resources through
`CONFIG_RESOURCE_ACCESS` and `COORDINATOR_ACCESS`. An API absent from the table, or with no
checks, needs no authorization (ApiVersions and the SASL exchange run before there is a principal).

Sources: core/.../KafkaApis.scala, AclApis.scala, AuthHelper.scala, ConfigHelper.scala,
ConfigAdminManager.scala, ControllerApis.scala (CreateTopics, DeleteTopics, CreatePartitions,
configs and other APIs a KRaft broker forwards) and DescribeTopicPartitionsRequestHandler.java.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from shoal.broker.security.authorizer import CLUSTER_NAME, Authorizer
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey


class Target(Enum):
    """Which resource name a grant is about."""

    CLUSTER = "the cluster, named kafka-cluster"
    TOPICS = "each topic the request names (each once)"
    GROUP = "the request's group id"
    GROUPS = "each group id the request names"
    TRANSACTIONAL_ID = "the request's transactional id"
    TRANSACTIONAL_IDS = "each transactional id the request names"
    LISTED = "each resource the response would list"
    # for these two the grant's resource type is the TOPIC / GROUP case; `config_grant` and
    # `coordinator_grant` give the one for the actual config type or key type
    CONFIG_RESOURCES = "each config resource, by its type (CONFIG_RESOURCE_ACCESS)"
    COORDINATOR_KEYS = "each coordinator key, by the key type (COORDINATOR_ACCESS)"
    ANY_OF_TYPE = "any resource of the type (Authorizer.authorize_any)"


class OnDeny(Enum):
    """What a denied check does to the response (see the module docstring)."""

    REQUEST = "request"
    RESOURCE = "resource"
    OMIT = "omit"
    FIELD = "field"


@dataclass(frozen=True)
class Grant:
    """One question to the authorizer: may the principal do `operation` on `resource` `target`?"""

    resource: ResourceType
    operation: AclOperation
    target: Target


@dataclass(frozen=True)
class Check:
    """One authorization step of an API: allowed when any grant is."""

    grants: tuple[Grant, ...]
    on_deny: OnDeny
    error: ErrorCode = ErrorCode.NONE
    when: str = ""
    note: str = ""


@dataclass(frozen=True)
class ApiAccess:
    """An API's checks, in Kafka's order."""

    checks: tuple[Check, ...] = ()
    note: str = ""


# Shorthands for the table: the resource types and operations, and the usual errors.
TOPIC, GROUP, CLUSTER, TXN_ID = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                                AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE)
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_ID_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _check(resource: ResourceType, operation: AclOperation, target: Target, on_deny: OnDeny,
           error: ErrorCode = ErrorCode.NONE, *, when: str = "", note: str = "",
           first: Grant | None = None) -> Check:
    """A check of one grant, or of ``first`` falling back to it."""
    grant = Grant(resource, operation, target)
    return Check((first, grant) if first else (grant,), on_deny, error, when, note)


def _cluster(operation: AclOperation, when: str = "", note: str = "") -> Check:
    """The commonest check: an operation on the cluster, failing the whole request."""
    return _check(CLUSTER, operation, Target.CLUSTER, OnDeny.REQUEST, CLUSTER_DENIED, when=when, note=note)


def _group(operation: AclOperation) -> Check:
    return _check(GROUP, operation, Target.GROUP, OnDeny.REQUEST, GROUP_DENIED)


def _topics(operation: AclOperation, *, when: str = "", note: str = "", first: Grant | None = None) -> Check:
    return _check(TOPIC, operation, Target.TOPICS, OnDeny.RESOURCE, TOPIC_DENIED, when=when, note=note, first=first)


def _write_txn_id(when: str = "") -> Check:
    return _check(TXN_ID, WRITE, Target.TRANSACTIONAL_ID, OnDeny.REQUEST, TXN_ID_DENIED, when=when)


def _configs(operation: AclOperation, more: str = "") -> Check:
    return Check((Grant(TOPIC, operation, Target.CONFIG_RESOURCES),), OnDeny.RESOURCE, TOPIC_DENIED,
                 note="resource and error by config type: CONFIG_RESOURCE_ACCESS" + more)


def _authorized_ops(resource: str, field: str = "") -> Check:
    """KIP-430: a requested authorized-operations field is computed with
    `Authorizer.authorized_operations`; it never fails the request."""
    return Check((), OnDeny.FIELD, when=f"the request asks for {resource} authorized operations",
                 note=field or f"{resource}_authorized_operations = Authorizer.authorized_operations(...)")


_CLUSTER_ACTION_FIRST = Grant(CLUSTER, CLUSTER_ACTION, Target.CLUSTER)
_CLUSTER_CREATE_FIRST = Grant(CLUSTER, CREATE, Target.CLUSTER)

# ConfigResource type code -> the ACL resource its configs live on and the error a denial reports.
# Describe and IncrementalAlterConfigs accept all of these; the legacy AlterConfigs refuses
# BROKER_LOGGER (INVALID_REQUEST) before authorizing. Other codes: INVALID_REQUEST.
CONFIG_RESOURCE_ACCESS: dict[int, tuple[ResourceType, ErrorCode]] = {
    2: (TOPIC, TOPIC_DENIED),            # TOPIC: the topic's name
    4: (CLUSTER, CLUSTER_DENIED),        # BROKER
    8: (CLUSTER, CLUSTER_DENIED),        # BROKER_LOGGER
    16: (CLUSTER, CLUSTER_DENIED),       # CLIENT_METRICS
    32: (GROUP, GROUP_DENIED),           # GROUP: the group's id
}

# FindCoordinator key type -> (resource, operation, error); SHARE (2) needs CLUSTER_ACTION on the
# cluster and fails the whole request, as AuthHelper.authorizeClusterOperation throws.
COORDINATOR_ACCESS: dict[int, tuple[ResourceType, AclOperation, ErrorCode]] = {
    0: (GROUP, DESCRIBE, GROUP_DENIED),
    1: (TXN_ID, DESCRIBE, TXN_ID_DENIED),
    2: (CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED),
}

# ShareFetch and ShareAcknowledge
_SHARE_DATA = ApiAccess((
    _group(READ),
    _topics(READ, note="a denied topic's partitions answer TOPIC_AUTHORIZATION_FAILED; the rest are served"),
))

API_ACCESS: dict[ApiKey, ApiAccess] = {
    # --- produce and consume ---
    ApiKey.PRODUCE: ApiAccess((
        _write_txn_id(when="the request carries transactional batches (a null transactional id is denied)"),
        _topics(WRITE, note="per partition: TOPIC_AUTHORIZATION_FAILED, checked before existence"),
    ), note="idempotent (non-transactional) produce checks nothing more: IDEMPOTENT_WRITE is checked by "
            "InitProducerId"),
    ApiKey.FETCH: ApiAccess((
        _check(CLUSTER, CLUSTER_ACTION, Target.CLUSTER, OnDeny.RESOURCE, TOPIC_DENIED,
               when="replica_id >= 0 (a follower)", note="every partition gets TOPIC_AUTHORIZATION_FAILED"),
        _topics(READ, when="a consumer (replica_id < 0)"),
    )),
    ApiKey.LIST_OFFSETS: ApiAccess((_topics(DESCRIBE),)),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ApiAccess((_topics(DESCRIBE, first=_CLUSTER_ACTION_FIRST),)),
    ApiKey.METADATA: ApiAccess((
        _topics(DESCRIBE, when="topics are named", note="TOPIC_AUTHORIZATION_FAILED with a zero topic id; "
                "existence is not checked (by id: the id is returned, the name is not)"),
        _check(TOPIC, DESCRIBE, Target.TOPICS, OnDeny.OMIT,
               when="all topics are asked for (null list, or an empty list at v0)"),
        _topics(CREATE, first=_CLUSTER_CREATE_FIRST,
                when="a described topic does not exist and auto-creation is allowed and asked for",
                note="TOPIC_AUTHORIZATION_FAILED instead of creating it"),
        _check(CLUSTER, DESCRIBE, Target.CLUSTER, OnDeny.FIELD, when="v8-v10 asks for cluster authorized "
               "operations", note="cluster_authorized_operations is 0 when denied, else authorized_operations"),
        _authorized_ops("topic"),
    )),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: ApiAccess((
        _topics(DESCRIBE, when="topics are named", note="TOPIC_AUTHORIZATION_FAILED with a zero topic id"),
        _check(TOPIC, DESCRIBE, Target.TOPICS, OnDeny.OMIT, when="all topics are asked for"),
        Check((), OnDeny.FIELD, note="topic_authorized_operations of every returned topic, always"),
    )),
    # --- consumer groups ---
    ApiKey.FIND_COORDINATOR: ApiAccess((
        Check((Grant(GROUP, DESCRIBE, Target.COORDINATOR_KEYS),), OnDeny.RESOURCE, GROUP_DENIED,
              note="resource and error by key type: COORDINATOR_ACCESS; before v4 the one key's "
                   "error is the response's error"),
    )),
    ApiKey.JOIN_GROUP: ApiAccess((_group(READ),)),
    ApiKey.SYNC_GROUP: ApiAccess((_group(READ),)),
    ApiKey.HEARTBEAT: ApiAccess((_group(READ),)),
    ApiKey.LEAVE_GROUP: ApiAccess((_group(READ),)),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ApiAccess((_group(READ),)),
    ApiKey.OFFSET_COMMIT: ApiAccess((_group(READ), _topics(READ))),
    ApiKey.OFFSET_FETCH: ApiAccess((
        _check(GROUP, DESCRIBE, Target.GROUPS, OnDeny.RESOURCE, GROUP_DENIED,
               note="v8+: that group's entry; before v8 the response's error"),
        _topics(DESCRIBE, when="partitions are named",
                note="each partition: committed offset -1 and TOPIC_AUTHORIZATION_FAILED"),
        _check(TOPIC, DESCRIBE, Target.LISTED, OnDeny.OMIT, when="all of a group's offsets are asked for"),
    )),
    ApiKey.OFFSET_DELETE: ApiAccess((_group(DELETE), _topics(READ))),
    ApiKey.DESCRIBE_GROUPS: ApiAccess((
        _check(GROUP, DESCRIBE, Target.GROUPS, OnDeny.RESOURCE, GROUP_DENIED),
        _authorized_ops("group", "authorized_operations of each described group (v3+)"),
    )),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ApiAccess((
        _check(GROUP, DESCRIBE, Target.GROUPS, OnDeny.RESOURCE, GROUP_DENIED),
        _authorized_ops("group", "authorized_operations of each described group"),
    )),
    # --- share groups (KIP-932; KafkaApis.handleShareGroupHeartbeat / handleShareGroupDescribe, 4.4) ---
    ApiKey.SHARE_GROUP_HEARTBEAT: ApiAccess((
        _group(READ),
        _check(TOPIC, DESCRIBE, Target.TOPICS, OnDeny.REQUEST, TOPIC_DENIED, when="subscribed topic names are given",
               note="any subscribed topic denied: the whole heartbeat fails"),
    )),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ApiAccess((
        _check(GROUP, DESCRIBE, Target.GROUPS, OnDeny.RESOURCE, GROUP_DENIED),
        _check(TOPIC, DESCRIBE, Target.LISTED, OnDeny.RESOURCE, TOPIC_DENIED, note="that topic's partitions fail"),
    )),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: ApiAccess((
        _group(READ),
        _topics(READ, note="a denied topic's partitions answer TOPIC_AUTHORIZATION_FAILED"),
    )),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: ApiAccess((
        _group(DELETE),
        _topics(READ, note="a denied topic answers TOPIC_AUTHORIZATION_FAILED"),
    )),
    ApiKey.SHARE_FETCH: _SHARE_DATA,
    ApiKey.SHARE_ACKNOWLEDGE: _SHARE_DATA,
    ApiKey.SHARE_GROUP_DESCRIBE: ApiAccess((
        _check(GROUP, DESCRIBE, Target.GROUPS, OnDeny.RESOURCE, GROUP_DENIED),
        _authorized_ops("group", "authorized_operations of each described group"),
        _check(TOPIC, DESCRIBE, Target.LISTED, OnDeny.RESOURCE, TOPIC_DENIED,
               note="a group whose members are assigned a topic not described: that group's entry fails"),
    )),
    ApiKey.LIST_GROUPS: ApiAccess((
        Check((Grant(CLUSTER, DESCRIBE, Target.CLUSTER), Grant(GROUP, DESCRIBE, Target.LISTED)), OnDeny.OMIT,
              note="DESCRIBE on the cluster lists every group; otherwise each group needs DESCRIBE"),
    )),
    ApiKey.DELETE_GROUPS: ApiAccess((_check(GROUP, DELETE, Target.GROUPS, OnDeny.RESOURCE, GROUP_DENIED),)),
    # --- transactions and producer ids ---
    ApiKey.INIT_PRODUCER_ID: ApiAccess((
        _write_txn_id(when="a transactional id is given"),
        Check((Grant(CLUSTER, IDEMPOTENT_WRITE, Target.CLUSTER), Grant(TOPIC, WRITE, Target.ANY_OF_TYPE)),
              OnDeny.REQUEST, CLUSTER_DENIED, when="no transactional id (an idempotent producer)",
              note="KIP-679: WRITE on any topic is enough"),
    )),
    ApiKey.ADD_PARTITIONS_TO_TXN: ApiAccess((
        _cluster(CLUSTER_ACTION, when="v4+ (broker to coordinator)"),
        _check(TXN_ID, WRITE, Target.TRANSACTIONAL_ID, OnDeny.REQUEST, TXN_ID_DENIED, when="before v4",
               note="every partition of the transaction gets the error"),
        _topics(WRITE, when="before v4; internal topics are not checked",
                note="any denial: the other partitions get OPERATION_NOT_ATTEMPTED"),
    )),
    ApiKey.ADD_OFFSETS_TO_TXN: ApiAccess((_write_txn_id(), _group(READ))),
    ApiKey.END_TXN: ApiAccess((_write_txn_id(),)),
    ApiKey.TXN_OFFSET_COMMIT: ApiAccess((_write_txn_id(), _group(READ), _topics(READ))),
    ApiKey.WRITE_TXN_MARKERS: ApiAccess((
        Check((Grant(CLUSTER, ALTER, Target.CLUSTER), Grant(CLUSTER, CLUSTER_ACTION, Target.CLUSTER)),
              OnDeny.REQUEST, CLUSTER_DENIED),
    )),
    ApiKey.DESCRIBE_TRANSACTIONS: ApiAccess((
        _check(TXN_ID, DESCRIBE, Target.TRANSACTIONAL_IDS, OnDeny.RESOURCE, TXN_ID_DENIED),
        _check(TOPIC, DESCRIBE, Target.LISTED, OnDeny.OMIT, note="topics of each transaction's partitions"),
    )),
    ApiKey.LIST_TRANSACTIONS: ApiAccess((_check(TXN_ID, DESCRIBE, Target.LISTED, OnDeny.OMIT),)),
    ApiKey.DESCRIBE_PRODUCERS: ApiAccess((_topics(READ),)),
    # --- topic administration ---
    ApiKey.CREATE_TOPICS: ApiAccess((
        _topics(CREATE, first=_CLUSTER_CREATE_FIRST, note='TOPIC_AUTHORIZATION_FAILED, "Authorization failed."'),
        _check(TOPIC, DESCRIBE_CONFIGS, Target.TOPICS, OnDeny.FIELD,
               note="topic_config_error_code = TOPIC_AUTHORIZATION_FAILED and no configs returned"),
    )),
    ApiKey.DELETE_TOPICS: ApiAccess((
        _topics(DELETE, first=Grant(CLUSTER, DELETE, Target.CLUSTER),
                note="TOPIC_AUTHORIZATION_FAILED before existence is checked"),
        _check(TOPIC, DESCRIBE, Target.TOPICS, OnDeny.FIELD, when="cluster DELETE was denied",
               note="a topic named by id whose name is not describable is answered with a null name"),
    )),
    ApiKey.CREATE_PARTITIONS: ApiAccess((_topics(ALTER),)),
    ApiKey.DELETE_RECORDS: ApiAccess((_topics(DELETE),)),
    ApiKey.ELECT_LEADERS: ApiAccess((_cluster(ALTER, note="every partition gets the error too"),)),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ApiAccess((_cluster(ALTER),)),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ApiAccess((_cluster(DESCRIBE),)),
    ApiKey.ALTER_REPLICA_LOG_DIRS: ApiAccess((_cluster(ALTER),)),
    ApiKey.DESCRIBE_LOG_DIRS: ApiAccess((_cluster(DESCRIBE, note="top-level error_code, empty results"),)),
    # --- configs ---
    ApiKey.DESCRIBE_CONFIGS: ApiAccess((_configs(DESCRIBE_CONFIGS),)),
    ApiKey.ALTER_CONFIGS: ApiAccess((_configs(ALTER_CONFIGS, " (not BROKER_LOGGER)"),)),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ApiAccess((_configs(ALTER_CONFIGS),)),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ApiAccess((_cluster(DESCRIBE_CONFIGS),)),
    ApiKey.ALTER_CLIENT_QUOTAS: ApiAccess((_cluster(ALTER_CONFIGS, note="every entry gets the error"),)),
    # --- cluster ---
    ApiKey.DESCRIBE_CLUSTER: ApiAccess((
        _check(CLUSTER, DESCRIBE, Target.CLUSTER, OnDeny.FIELD,
               when="the request asks for cluster authorized operations",
               note="cluster_authorized_operations is 0 when denied, else authorized_operations"),
    ), note="a broker answers anyone; only the authorized-operations field needs DESCRIBE"),
    ApiKey.DESCRIBE_QUORUM: ApiAccess((_cluster(DESCRIBE),)),
    # --- security ---
    ApiKey.DESCRIBE_ACLS: ApiAccess((_cluster(DESCRIBE),)),
    ApiKey.CREATE_ACLS: ApiAccess((_cluster(ALTER, note="every creation result gets the error"),)),
    ApiKey.DELETE_ACLS: ApiAccess((_cluster(ALTER, note="every filter result gets the error"),)),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ApiAccess((_cluster(DESCRIBE),)),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ApiAccess((_cluster(ALTER, note="every user result gets the error"),)),
    # --- before authentication: nothing to check ---
    ApiKey.API_VERSIONS: ApiAccess(),
    ApiKey.SASL_HANDSHAKE: ApiAccess(),
    ApiKey.SASL_AUTHENTICATE: ApiAccess(),
}


def config_grant(config_type: int, operation: AclOperation) -> tuple[Grant, ErrorCode] | None:
    """The grant and denial error for one config resource of a Describe/AlterConfigs request
    (``operation``: DESCRIBE_CONFIGS or ALTER_CONFIGS); None for a type Kafka refuses as INVALID_REQUEST."""
    access = CONFIG_RESOURCE_ACCESS.get(config_type)
    if access is None:
        return None
    resource, error = access
    return Grant(resource, operation, Target.CLUSTER if resource == CLUSTER else Target.CONFIG_RESOURCES), error


def coordinator_grant(key_type: int) -> tuple[Grant, ErrorCode] | None:
    """The grant and denial error for one FindCoordinator key; None for an unknown key type."""
    access = COORDINATOR_ACCESS.get(key_type)
    if access is None:
        return None
    resource, operation, error = access
    return Grant(resource, operation, Target.CLUSTER if resource == CLUSTER else Target.COORDINATOR_KEYS), error


def grant_allowed(authorizer: Authorizer, principal: str, host: str, grant: Grant, name: str | None = None) -> bool:
    """Ask ``authorizer`` one grant: the cluster by its name, ANY_OF_TYPE through `authorize_any`,
    any other target on ``name`` (the caller maps config resources and coordinator keys first)."""
    if grant.target is Target.CLUSTER:
        name = CLUSTER_NAME
    elif grant.target is Target.ANY_OF_TYPE:
        return authorizer.authorize_any(principal, host, grant.operation, grant.resource)
    if name is None:
        raise ValueError(f"{grant.target.name} needs a resource name")
    return authorizer.authorize(principal, host, grant.operation, grant.resource, name)


def check_allowed(authorizer: Authorizer, principal: str, host: str, check: Check, name: str | None = None) -> bool:
    """Whether any of a check's grants is allowed (a check without grants always is)."""
    if not check.grants:
        return True
    return any(grant_allowed(authorizer, principal, host, g, name) for g in check.grants)
