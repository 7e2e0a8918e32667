"""The authorizer core against Kafka's semantics (StandardAuthorizerTest, ResourcePatternFilterTest,
BaseAuthorizerTest's authorizeByResourceType cases, AclControlManager's validation), re-expressed."""

from __future__ import annotations

import json

import pytest

from shoal.broker.security import api_access
from shoal.broker.security.api_access import API_ACCESS, OnDeny, Target
from shoal.broker.security.authorizer import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclStore,
    Authorizer,
    KafkaPrincipal,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourcePatternFilter,
    from_code,
    from_record,
    parse_super_users,
    to_record,
    validate_new_binding,
)
from shoal.protocol.acl_operations import (
    CLUSTER_OPERATIONS,
    GROUP_OPERATIONS,
    TOPIC_OPERATIONS,
    AclOperation,
    ResourceType,
)
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey

Op, RT, PT = AclOperation, ResourceType, PatternType
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
LOCAL = "127.0.0.1"


def acl(rt: RT, name: str, pt: PT, principal: str, host: str, op: Op, perm: PermissionType) -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))


def authorizer(*bindings: AclBinding, allow_everyone: bool = False) -> Authorizer:
    return Authorizer(
        AclStore(bindings), super_users={"User:superman"}, allow_everyone_if_no_acl_found=allow_everyone
    )


def decide(auth: Authorizer, user: str, actions: list[tuple[Op, RT, str]], host: str = LOCAL) -> list[bool]:
    return [auth.authorize(f"User:{user}", host, op, rt, name) for op, rt, name in actions]


def foo_acl(op: Op, perm: PermissionType) -> AclBinding:
    return acl(RT.TOPIC, "foo_", PREFIXED, "User:bob", "*", op, perm)


def bar_acl(op: Op, perm: PermissionType) -> AclBinding:
    return acl(RT.GROUP, "bar", LITERAL, "User:*", "*", op, perm)


# --- the decision ---


def test_super_user_is_allowed_despite_deny_and_no_acls() -> None:
    auth = authorizer(acl(RT.TOPIC, "*", LITERAL, "User:*", "*", Op.ALL, DENY))
    assert auth.authorize("User:superman", LOCAL, Op.WRITE, RT.TOPIC, "t")
    assert auth.authorize("User:superman", LOCAL, Op.ALTER, RT.CLUSTER, "kafka-cluster")
    assert not auth.authorize("User:bob", LOCAL, Op.WRITE, RT.TOPIC, "t")
    # the super user is matched by its full principal text
    assert not auth.authorize("Group:superman", LOCAL, Op.WRITE, RT.TOPIC, "t")


@pytest.mark.parametrize("allow_everyone, expected", [(True, [False, True]), (False, [False, False])])
def test_allow_everyone_if_no_acl_found(allow_everyone: bool, expected: list[bool]) -> None:
    auth = authorizer(
        acl(RT.TOPIC, "topic1", LITERAL, "User:Alice", "*", Op.READ, ALLOW), allow_everyone=allow_everyone
    )
    assert decide(auth, "Bob", [(Op.READ, RT.TOPIC, "topic1"), (Op.READ, RT.TOPIC, "topic2")]) == expected


def test_allow_everyone_does_not_apply_when_a_prefix_or_wildcard_acl_covers_the_resource() -> None:
    auth = authorizer(
        acl(RT.TOPIC, "pay", PREFIXED, "User:alice", "*", Op.WRITE, ALLOW),
        acl(RT.GROUP, "*", LITERAL, "User:alice", "*", Op.READ, ALLOW),
        allow_everyone=True,
    )
    assert decide(
        auth,
        "bob",
        [
            (Op.READ, RT.TOPIC, "payments"),
            (Op.READ, RT.GROUP, "g"),
            (Op.READ, RT.TOPIC, "other"),
            (Op.READ, RT.TRANSACTIONAL_ID, "x"),
        ],
    ) == [False, False, True, True]


def test_simple_authorizations() -> None:
    auth = authorizer(
        foo_acl(Op.READ, ALLOW),
        foo_acl(Op.WRITE, ALLOW),
        bar_acl(Op.DESCRIBE_CONFIGS, ALLOW),
        bar_acl(Op.ALTER_CONFIGS, ALLOW),
    )
    assert auth.authorize("User:bob", LOCAL, Op.READ, RT.TOPIC, "foo_")
    assert auth.authorize("User:fred", LOCAL, Op.ALTER_CONFIGS, RT.GROUP, "bar")
    assert not auth.authorize("User:fred", LOCAL, Op.READ, RT.TOPIC, "foo_")
    assert not auth.authorize("User:bob", LOCAL, Op.READ, RT.TOPIC, "foo")


def test_deny_takes_precedence_with_operation_all() -> None:
    auth = authorizer(
        acl(RT.TOPIC, "foo", LITERAL, "User:alice", "*", Op.ALL, DENY),
        acl(RT.TOPIC, "foo", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, DENY),
        acl(RT.TOPIC, "foo", PREFIXED, "User:*", "*", Op.DESCRIBE, ALLOW),
    )
    assert decide(
        auth,
        "alice",
        [
            (Op.WRITE, RT.TOPIC, "foo"),
            (Op.READ, RT.TOPIC, "foo"),
            (Op.DESCRIBE, RT.TOPIC, "foo"),
            (Op.READ, RT.TOPIC, "foobar"),
        ],
    ) == [False, False, False, True]
    assert decide(
        auth,
        "bob",
        [
            (Op.DESCRIBE, RT.TOPIC, "foo"),
            (Op.READ, RT.TOPIC, "foo"),
            (Op.WRITE, RT.TOPIC, "foo"),
            (Op.DESCRIBE, RT.TOPIC, "foobaz"),
            (Op.READ, RT.TOPIC, "foobaz"),
        ],
    ) == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    auth = authorizer(
        acl(RT.TOPIC, "foo", LITERAL, "User:*", "*", Op.ALL, ALLOW),
        acl(RT.TOPIC, "bar", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
        acl(RT.TOPIC, "baz", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
    )
    assert decide(
        auth,
        "alice",
        [(Op.WRITE, RT.TOPIC, "foo"), (Op.DESCRIBE_CONFIGS, RT.TOPIC, "bar"), (Op.DESCRIBE, RT.TOPIC, "baz")],
    ) == [True, True, False]
    assert decide(
        auth, "bob", [(Op.WRITE, RT.TOPIC, "foo"), (Op.READ, RT.TOPIC, "bar"), (Op.DESCRIBE, RT.TOPIC, "baz")]
    ) == [True, False, True]
    assert decide(
        auth,
        "malory",
        [(Op.DESCRIBE, RT.TOPIC, "foo"), (Op.WRITE, RT.TOPIC, "bar"), (Op.READ, RT.TOPIC, "baz")],
    ) == [True, False, False]


def test_host_matching() -> None:
    host1, host2 = "192.168.1.1", "192.168.1.2"
    auth = authorizer(
        acl(RT.TOPIC, "foo", LITERAL, "User:alice", host1, Op.READ, DENY),
        acl(RT.TOPIC, "foo", LITERAL, "User:alice", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "bar", LITERAL, "User:bob", host2, Op.READ, ALLOW),
        acl(RT.TOPIC, "bar", LITERAL, "User:*", LOCAL, Op.DESCRIBE, ALLOW),
    )
    actions = [(Op.READ, RT.TOPIC, "foo"), (Op.READ, RT.TOPIC, "bar"), (Op.DESCRIBE, RT.TOPIC, "bar")]
    assert decide(auth, "alice", actions, LOCAL) == [True, False, True]
    assert decide(auth, "alice", actions, host1) == [False, False, False]
    assert decide(auth, "alice", actions, host2) == [True, False, False]
    assert decide(auth, "bob", actions, LOCAL) == [False, False, True]
    assert decide(auth, "bob", actions, host1) == [False, False, False]
    assert decide(auth, "bob", actions, host2) == [False, True, True]


def test_many_acls_literal_prefixed_and_wildcard() -> None:
    auth = authorizer(
        acl(RT.TOPIC, "green2", LITERAL, "User:*", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "green", PREFIXED, "User:bob", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "betamax4", LITERAL, "User:bob", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "betamax", LITERAL, "User:bob", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "beta", PREFIXED, "User:*", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "alpha", PREFIXED, "User:*", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "alp", PREFIXED, "User:bob", "*", Op.READ, DENY),
        acl(RT.GROUP, "*", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
        acl(RT.GROUP, "wheel", LITERAL, "User:*", "*", Op.WRITE, DENY),
    )
    assert decide(
        auth,
        "bob",
        [
            (Op.READ, RT.TOPIC, "green1"),
            (Op.WRITE, RT.GROUP, "wheel"),
            (Op.READ, RT.TOPIC, "alpha"),
            (Op.WRITE, RT.GROUP, "arbitrary"),
            (Op.READ, RT.TOPIC, "ala"),
        ],
    ) == [True, False, False, True, False]
    assert decide(
        auth,
        "carol",
        [(Op.READ, RT.TOPIC, "alpha1"), (Op.READ, RT.TOPIC, "green1"), (Op.READ, RT.TOPIC, "betamax4")],
    ) == [True, False, True]


def test_prefix_acls() -> None:
    auth = authorizer(
        acl(RT.TOPIC, "fooa", PREFIXED, "User:alice", "*", Op.ALL, ALLOW),
        acl(RT.TOPIC, "foobar", LITERAL, "User:bob", "*", Op.ALL, ALLOW),
        acl(RT.TOPIC, "f", PREFIXED, "User:bob", "*", Op.ALL, ALLOW),
    )
    assert decide(
        auth,
        "bob",
        [(Op.WRITE, RT.TOPIC, "foobarr"), (Op.READ, RT.TOPIC, "goobar"), (Op.READ, RT.TOPIC, "fooa")],
    ) == [True, False, True]
    assert decide(
        auth,
        "alice",
        [(Op.DESCRIBE, RT.TOPIC, "fooa"), (Op.WRITE, RT.TOPIC, "bar"), (Op.READ, RT.TOPIC, "baz")],
    ) == [True, False, False]


def test_prefix_lookup_with_more_prefixes_than_name_characters() -> None:
    # exercises the index's probe-each-prefix path (more PREFIXED patterns than the name is long)
    many = [acl(RT.TOPIC, f"p{i}", PREFIXED, "User:bob", "*", Op.READ, ALLOW) for i in range(20)]
    auth = authorizer(*many, acl(RT.TOPIC, "ab", PREFIXED, "User:bob", "*", Op.READ, ALLOW))
    assert decide(
        auth,
        "bob",
        [
            (Op.READ, RT.TOPIC, "abc"),
            (Op.READ, RT.TOPIC, "p13x"),
            (Op.READ, RT.TOPIC, "a"),
            (Op.READ, RT.TOPIC, "q"),
            (Op.READ, RT.TOPIC, "ab"),
        ],
    ) == [True, True, False, False, True]


def test_literal_acl_does_not_apply_to_longer_names() -> None:
    auth = authorizer(acl(RT.TOPIC, "foo", LITERAL, "User:bob", "*", Op.READ, ALLOW))
    assert decide(
        auth, "bob", [(Op.READ, RT.TOPIC, "foo"), (Op.READ, RT.TOPIC, "foobar"), (Op.READ, RT.TOPIC, "fo")]
    ) == [True, False, False]


@pytest.mark.parametrize("op", [Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_allow_implies_describe(op: Op) -> None:
    assert authorizer(foo_acl(op, ALLOW)).authorize("User:bob", LOCAL, Op.DESCRIBE, RT.TOPIC, "foo_bar")


@pytest.mark.parametrize("op", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.CLUSTER_ACTION])
def test_other_operations_do_not_imply_describe(op: Op) -> None:
    assert not authorizer(foo_acl(op, ALLOW)).authorize("User:bob", LOCAL, Op.DESCRIBE, RT.TOPIC, "foo_bar")


def test_implication_is_one_way_and_for_allow_only() -> None:
    # DESCRIBE does not imply READ; a DENY READ does not deny DESCRIBE (a separate ALLOW grants it)
    assert not authorizer(foo_acl(Op.DESCRIBE, ALLOW)).authorize(
        "User:bob", LOCAL, Op.READ, RT.TOPIC, "foo_x"
    )
    auth = authorizer(foo_acl(Op.READ, DENY), foo_acl(Op.DESCRIBE, ALLOW))
    assert auth.authorize("User:bob", LOCAL, Op.DESCRIBE, RT.TOPIC, "foo_x")
    assert not auth.authorize("User:bob", LOCAL, Op.READ, RT.TOPIC, "foo_x")
    assert not authorizer(foo_acl(Op.DESCRIBE, DENY), foo_acl(Op.READ, ALLOW)).authorize(
        "User:bob", LOCAL, Op.DESCRIBE, RT.TOPIC, "foo_x"
    )


def test_alter_configs_implies_describe_configs() -> None:
    assert authorizer(foo_acl(Op.ALTER_CONFIGS, ALLOW)).authorize(
        "User:bob", LOCAL, Op.DESCRIBE_CONFIGS, RT.TOPIC, "foo_x"
    )
    auth = authorizer(foo_acl(Op.ALTER_CONFIGS, DENY), foo_acl(Op.DESCRIBE_CONFIGS, ALLOW))
    assert auth.authorize("User:bob", LOCAL, Op.DESCRIBE_CONFIGS, RT.TOPIC, "foo_x")
    assert not auth.authorize("User:bob", LOCAL, Op.ALTER_CONFIGS, RT.TOPIC, "foo_x")


def test_all_allows_every_operation_and_deny_all_denies_every_operation() -> None:
    auth = authorizer(
        acl(RT.CLUSTER, "kafka-cluster", LITERAL, "User:ops", "*", Op.ALL, ALLOW),
        acl(RT.TOPIC, "t", LITERAL, "User:*", "*", Op.ALL, ALLOW),
        acl(RT.TOPIC, "t", LITERAL, "User:eve", "*", Op.ALL, DENY),
    )
    assert all(
        decide(
            auth,
            "ops",
            [
                (op, RT.CLUSTER, "kafka-cluster")
                for op in (Op.CREATE, Op.ALTER, Op.IDEMPOTENT_WRITE, Op.CLUSTER_ACTION)
            ],
        )
    )
    assert not any(decide(auth, "eve", [(op, RT.TOPIC, "t") for op in (Op.READ, Op.DESCRIBE, Op.WRITE)]))


def test_wildcard_principal_matches_every_principal_type() -> None:
    auth = authorizer(bar_acl(Op.READ, DENY), acl(RT.GROUP, "g", LITERAL, "User:*", "*", Op.READ, ALLOW))
    assert not auth.authorize("User:alice", LOCAL, Op.READ, RT.GROUP, "bar")
    assert auth.authorize("User:alice", LOCAL, Op.READ, RT.GROUP, "g")
    assert auth.authorize("Group:admins", LOCAL, Op.READ, RT.GROUP, "g")


def test_principal_type_must_match_exactly() -> None:
    auth = authorizer(acl(RT.TOPIC, "t", LITERAL, "User:alice", "*", Op.READ, ALLOW))
    assert not auth.authorize("Group:alice", LOCAL, Op.READ, RT.TOPIC, "t")
    assert not auth.authorize("User:Alice", LOCAL, Op.READ, RT.TOPIC, "t")


def test_resource_type_is_part_of_the_match() -> None:
    auth = authorizer(acl(RT.GROUP, "x", LITERAL, "User:bob", "*", Op.READ, ALLOW))
    assert not auth.authorize("User:bob", LOCAL, Op.READ, RT.TOPIC, "x")


# --- authorize_any (authorizeByResourceType) ---


def test_authorize_any_unrelated_deny_does_not_dominate_allow() -> None:
    h1, h2 = "192.168.1.1", "192.168.1.2"
    auth = authorizer(
        acl(RT.TOPIC, "sb1", LITERAL, "User:user1", h1, Op.READ, DENY),
        acl(RT.TOPIC, "sb1", LITERAL, "User:user2", h1, Op.READ, DENY),
        acl(RT.TOPIC, "sb1", LITERAL, "User:user1", h2, Op.WRITE, DENY),
        acl(RT.TOPIC, "sb1", LITERAL, "User:user2", h2, Op.READ, DENY),
        acl(RT.TOPIC, "sb1", LITERAL, "User:user1", h2, Op.READ, ALLOW),
        acl(RT.TOPIC, "sb2", LITERAL, "User:user1", h2, Op.READ, DENY),
        acl(RT.GROUP, "s", PREFIXED, "User:user1", h2, Op.READ, DENY),
    )
    for rt in (RT.TOPIC, RT.GROUP, RT.TRANSACTIONAL_ID, RT.CLUSTER):
        assert not auth.authorize_any("User:user1", h1, Op.READ, rt)
    assert auth.authorize_any("User:user1", h2, Op.READ, RT.TOPIC)


def test_authorize_any_literal_deny_on_the_same_name_wins() -> None:
    store = AclStore([acl(RT.TOPIC, "sb1", LITERAL, "User:user1", "*", Op.WRITE, ALLOW)])
    auth = Authorizer(store)
    assert auth.authorize_any("User:user1", LOCAL, Op.WRITE, RT.TOPIC)
    store.add(acl(RT.TOPIC, "sb1", LITERAL, "User:user1", "*", Op.WRITE, DENY))
    assert not auth.authorize_any("User:user1", LOCAL, Op.WRITE, RT.TOPIC)


def test_authorize_any_prefixed_deny_dominates() -> None:
    store = AclStore()
    auth = Authorizer(store)

    def add(name: str, perm: PermissionType) -> bool:
        store.add(acl(RT.GROUP, name, PREFIXED, "User:user1", "*", Op.READ, perm))
        return auth.authorize_any("User:user1", LOCAL, Op.READ, RT.GROUP)

    assert [add("abcde", ALLOW), add("abcd", DENY), add("abc", ALLOW), add("a", DENY), add("ab", ALLOW)] == [
        True,
        False,
        True,
        False,
        False,
    ]


def test_authorize_any_wildcard_deny_dominates() -> None:
    store = AclStore([acl(RT.GROUP, "hello", PREFIXED, "User:user1", "*", Op.WRITE, ALLOW)])
    auth = Authorizer(store)
    assert auth.authorize_any("User:user1", LOCAL, Op.WRITE, RT.GROUP)
    store.add(acl(RT.GROUP, "*", LITERAL, "User:user1", "*", Op.WRITE, DENY))
    assert not auth.authorize_any("User:user1", LOCAL, Op.WRITE, RT.GROUP)
    store.add(acl(RT.GROUP, "*", LITERAL, "User:user1", "*", Op.WRITE, ALLOW))
    store.add(acl(RT.GROUP, "aloha", LITERAL, "User:user1", "*", Op.WRITE, ALLOW))
    assert not auth.authorize_any("User:user1", LOCAL, Op.WRITE, RT.GROUP)


def test_authorize_any_wildcard_allow_beats_named_denies() -> None:
    # the check on an arbitrary name is denied by the prefix, but the wildcard ALLOW still counts
    auth = authorizer(
        acl(RT.TOPIC, "*", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
        acl(RT.TOPIC, "h", PREFIXED, "User:bob", "*", Op.WRITE, DENY),
        acl(RT.TOPIC, "*", PREFIXED, "User:bob", "*", Op.WRITE, DENY),
    )
    assert not auth.authorize("User:bob", LOCAL, Op.WRITE, RT.TOPIC, "hardcode")
    assert auth.authorize_any("User:bob", LOCAL, Op.WRITE, RT.TOPIC)


def test_authorize_any_deny_prefix_equal_to_the_allowed_name_dominates() -> None:
    auth = authorizer(
        acl(RT.TOPIC, "x1", LITERAL, "User:bob", "*", Op.WRITE, ALLOW),
        acl(RT.TOPIC, "y", PREFIXED, "User:bob", "*", Op.WRITE, ALLOW),
        acl(RT.TOPIC, "x1", PREFIXED, "User:bob", "*", Op.WRITE, DENY),
        acl(RT.TOPIC, "y", PREFIXED, "User:bob", "*", Op.WRITE, DENY),
    )
    assert not auth.authorize_any("User:bob", LOCAL, Op.WRITE, RT.TOPIC)
    auth.store.remove(acl(RT.TOPIC, "y", PREFIXED, "User:bob", "*", Op.WRITE, DENY))
    assert auth.authorize_any("User:bob", LOCAL, Op.WRITE, RT.TOPIC)


def test_authorize_any_with_operation_all_super_users_and_default() -> None:
    store = AclStore()
    auth = Authorizer(store, super_users={"User:admin"})
    assert not auth.authorize_any("User:user1", LOCAL, Op.READ, RT.TOPIC)
    assert auth.authorize_any("User:admin", LOCAL, Op.READ, RT.TOPIC)
    store.add(acl(RT.TOPIC, "sb1", LITERAL, "User:user1", "*", Op.WRITE, DENY))
    store.add(acl(RT.TOPIC, "sb1", LITERAL, "User:user1", "*", Op.ALL, ALLOW))
    assert auth.authorize_any("User:user1", LOCAL, Op.READ, RT.TOPIC)
    store.add(acl(RT.TOPIC, "sb1", LITERAL, "User:user1", "*", Op.ALL, DENY))
    assert not auth.authorize_any("User:user1", LOCAL, Op.READ, RT.TOPIC)
    # no ACL at all on the type: the no-ACL default decides
    assert Authorizer(AclStore(), allow_everyone_if_no_acl_found=True).authorize_any(
        "User:x", LOCAL, Op.WRITE, RT.TOPIC
    )
    with pytest.raises(ValueError):
        auth.authorize_any("User:user1", LOCAL, Op.ANY, RT.TOPIC)


def test_authorize_any_does_not_use_implication() -> None:
    auth = authorizer(acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.WRITE, ALLOW))
    assert auth.authorize("User:bob", LOCAL, Op.DESCRIBE, RT.TOPIC, "t")
    assert not auth.authorize_any("User:bob", LOCAL, Op.DESCRIBE, RT.TOPIC)


# --- authorized operations (KIP-430) ---


def test_authorized_operations_bit_field() -> None:
    auth = authorizer(
        acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.ALTER_CONFIGS, ALLOW),
        acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.DESCRIBE_CONFIGS, DENY),
    )
    bits = auth.authorized_operations("User:bob", LOCAL, RT.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS)
    assert auth.authorized_operations("User:eve", LOCAL, RT.TOPIC, "t") == 0
    assert auth.authorized_operations("User:superman", LOCAL, RT.TOPIC, "t") == TOPIC_OPERATIONS
    assert auth.authorized_operations("User:superman", LOCAL, RT.GROUP, "g") == GROUP_OPERATIONS
    assert (
        auth.authorized_operations("User:superman", LOCAL, RT.CLUSTER, "kafka-cluster") == CLUSTER_OPERATIONS
    )
    assert auth.authorized_operations("User:superman", LOCAL, RT.TRANSACTIONAL_ID, "x") == (
        (1 << Op.DESCRIBE) | (1 << Op.WRITE)
    )


# --- filters ---


@pytest.mark.parametrize(
    "flt, pattern, expected",
    [
        ((RT.TOPIC, "Name", LITERAL), (RT.GROUP, "Name", LITERAL), False),
        ((RT.TOPIC, "Different", PREFIXED), (RT.TOPIC, "Name", PREFIXED), False),
        ((RT.TOPIC, "NAME", LITERAL), (RT.TOPIC, "Name", LITERAL), False),
        ((RT.TOPIC, "Name", LITERAL), (RT.TOPIC, "Name", PREFIXED), False),
        ((RT.ANY, "Name", PREFIXED), (RT.TOPIC, "Name", PREFIXED), True),
        ((RT.TOPIC, None, PREFIXED), (RT.TOPIC, "Name", PREFIXED), True),
        ((RT.TOPIC, None, PT.ANY), (RT.TOPIC, "Name", PREFIXED), True),
        ((RT.TOPIC, None, PT.MATCH), (RT.TOPIC, "Name", PREFIXED), True),
        ((RT.TOPIC, "Name", LITERAL), (RT.TOPIC, "Name", LITERAL), True),
        ((RT.TOPIC, "Name", PT.ANY), (RT.TOPIC, "Name", LITERAL), True),
        ((RT.TOPIC, "Name", PT.MATCH), (RT.TOPIC, "Name", LITERAL), True),
        ((RT.TOPIC, "Name-something", PT.MATCH), (RT.TOPIC, "Name", LITERAL), False),
        ((RT.TOPIC, "*", LITERAL), (RT.TOPIC, "*", LITERAL), True),
        ((RT.TOPIC, "Name", LITERAL), (RT.TOPIC, "*", LITERAL), False),
        ((RT.TOPIC, "*", LITERAL), (RT.TOPIC, "Name", LITERAL), False),
        ((RT.TOPIC, "Name", PT.ANY), (RT.TOPIC, "*", LITERAL), False),
        ((RT.TOPIC, "Name", PT.MATCH), (RT.TOPIC, "*", LITERAL), True),
        ((RT.TOPIC, "Name", PREFIXED), (RT.TOPIC, "Name", PREFIXED), True),
        ((RT.TOPIC, "Name", PREFIXED), (RT.TOPIC, "Name-something", PREFIXED), False),
        ((RT.TOPIC, "Name-something", PREFIXED), (RT.TOPIC, "Name", PREFIXED), False),
        ((RT.TOPIC, "Name-something", PT.ANY), (RT.TOPIC, "Name", PREFIXED), False),
        ((RT.TOPIC, "Name-something", PT.MATCH), (RT.TOPIC, "Name", PREFIXED), True),
        ((RT.TOPIC, "Name", PT.MATCH), (RT.TOPIC, "Name-something", PREFIXED), False),
    ],
)
def test_resource_pattern_filter(flt: tuple, pattern: tuple, expected: bool) -> None:
    assert ResourcePatternFilter(*flt).matches(ResourcePattern(*pattern)) is expected


def test_entry_filter_and_unknown_filters() -> None:
    entry = AccessControlEntry("User:bob", "10.0.0.1", Op.READ, ALLOW)
    assert AccessControlEntryFilter().matches(entry)
    assert AccessControlEntryFilter("User:bob", "10.0.0.1", Op.READ, ALLOW).matches(entry)
    assert not AccessControlEntryFilter(principal="User:alice").matches(entry)
    assert not AccessControlEntryFilter(host="*").matches(entry)  # filters compare hosts literally
    assert not AccessControlEntryFilter(operation=Op.WRITE).matches(entry)
    assert not AccessControlEntryFilter(permission=DENY).matches(entry)
    assert AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.UNKNOWN)).is_unknown()
    assert AclBindingFilter(ResourcePatternFilter(RT.UNKNOWN)).is_unknown()
    assert AclBindingFilter(ResourcePatternFilter(pattern_type=PT.UNKNOWN)).is_unknown()
    assert not AclBindingFilter().is_unknown()


# --- validation of new ACLs ---

GOOD = acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.READ, ALLOW)


@pytest.mark.parametrize(
    "binding, message",
    [
        (
            acl(RT.CLUSTER, "my-cluster", LITERAL, "User:bob", "*", Op.ALTER, ALLOW),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (acl(RT.TOPIC, "", LITERAL, "User:bob", "*", Op.READ, ALLOW), "Invalid empty resource name"),
        (acl(RT.ANY, "t", LITERAL, "User:bob", "*", Op.READ, ALLOW), "Invalid resourceType ANY"),
        (acl(RT.UNKNOWN, "t", LITERAL, "User:bob", "*", Op.READ, ALLOW), "Invalid resourceType UNKNOWN"),
        (acl(RT.TOPIC, "t", PT.MATCH, "User:bob", "*", Op.READ, ALLOW), "Invalid patternType MATCH"),
        (acl(RT.TOPIC, "t", PT.ANY, "User:bob", "*", Op.READ, ALLOW), "Invalid patternType ANY"),
        (acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.ANY, ALLOW), "Invalid operation ANY"),
        (acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.UNKNOWN, ALLOW), "Invalid operation UNKNOWN"),
        (
            acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.READ, PermissionType.ANY),
            "Invalid permissionType ANY",
        ),
        (acl(RT.TOPIC, "t", LITERAL, "bob", "*", Op.READ, ALLOW), "Invalid principal 'bob'"),
    ],
)
def test_create_validation_errors(binding: AclBinding, message: str) -> None:
    error = validate_new_binding(binding)
    assert error is not None
    assert error.code == ErrorCode.INVALID_REQUEST
    assert error.message.startswith(message)


def test_valid_bindings_pass_validation() -> None:
    assert validate_new_binding(GOOD) is None
    assert (
        validate_new_binding(acl(RT.CLUSTER, "kafka-cluster", LITERAL, "User:*", "*", Op.ALL, DENY)) is None
    )
    assert (
        validate_new_binding(acl(RT.TOPIC, "pre", PREFIXED, "User:a:b", "10.0.0.1", Op.WRITE, DENY)) is None
    )


# --- the store ---


def test_store_create_reports_errors_and_new_bindings() -> None:
    store = AclStore([GOOD])
    other = acl(RT.GROUP, "g", LITERAL, "User:bob", "*", Op.READ, ALLOW)
    bad = acl(RT.TOPIC, "t", PT.MATCH, "User:bob", "*", Op.READ, ALLOW)
    errors, new = store.create([GOOD, other, bad, other], apply=False)
    assert [e is None for e in errors] == [True, True, False, True]
    assert new == [other]
    assert other not in store  # apply=False changed nothing
    store.create([other])
    assert other in store and len(store) == 2
    assert store.add(other) is False and store.remove(other) is True and store.remove(other) is False


def test_store_delete_matches_against_the_state_before_the_request() -> None:
    a = acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.READ, ALLOW)
    b = acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.WRITE, ALLOW)
    c = acl(RT.GROUP, "g", LITERAL, "User:eve", "*", Op.READ, DENY)
    store = AclStore([a, b, c])
    by_topic = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "t", PT.MATCH))
    by_read = AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.READ))
    unknown = AclBindingFilter(entry=AccessControlEntryFilter(permission=PermissionType.UNKNOWN))
    results, removed = store.delete([by_topic, by_read, unknown])
    assert results[0].error is None and set(results[0].deleted) == {a, b}
    assert set(results[1].deleted) == {a, c}
    assert results[2].error is not None and results[2].error.code == ErrorCode.INVALID_REQUEST
    assert results[2].error.message == "Unknown entryFilter."
    assert sorted(removed, key=str) == sorted([a, b, c], key=str) and len(store) == 0


def test_describe_uses_kafkas_order_and_filters() -> None:
    bindings = [
        acl(RT.GROUP, "g", LITERAL, "User:a", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "apple", LITERAL, "User:a", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "zebra", PREFIXED, "User:a", "*", Op.READ, ALLOW),
        acl(RT.TOPIC, "zebra", LITERAL, "User:b", "*", Op.WRITE, ALLOW),
        acl(RT.TOPIC, "zebra", LITERAL, "User:a", "*", Op.WRITE, ALLOW),
    ]
    store = AclStore(reversed(bindings))
    # resource type, then name descending, pattern type, operation, principal
    assert store.describe(AclBindingFilter()) == [
        bindings[4],
        bindings[3],
        bindings[2],
        bindings[1],
        bindings[0],
    ]
    assert list(store) == store.describe(AclBindingFilter())
    assert store.describe(AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "zebra-1", PT.MATCH))) == [
        bindings[2]
    ]


def test_records_round_trip_through_json() -> None:
    bindings = [
        GOOD,
        acl(RT.TOPIC, "p", PREFIXED, "User:*", "10.1.1.1", Op.ALL, DENY),
        acl(RT.CLUSTER, "kafka-cluster", LITERAL, "User:ops", "*", Op.IDEMPOTENT_WRITE, ALLOW),
    ]
    store = AclStore(bindings)
    records = json.loads(json.dumps(store.records()))
    assert all(r["t"] == "acl" and r["op"] == "create" for r in records)
    replayed = AclStore()
    assert all(replayed.apply(r) for r in records)
    assert list(replayed) == list(store)
    op, binding = from_record(to_record(bindings[1], "delete"))
    assert (op, binding) == ("delete", bindings[1])
    assert replayed.apply(to_record(bindings[1], "delete")) and bindings[1] not in replayed
    assert replayed.apply(to_record(bindings[1], "delete")) is False


def test_bad_records_are_refused() -> None:
    with pytest.raises(ValueError):
        from_record({"t": "topic", "op": "create"})
    with pytest.raises(ValueError):
        to_record(GOOD, "upsert")


def test_unknown_codes_become_unknown() -> None:
    assert from_code(PatternType, 99) == PatternType.UNKNOWN
    assert from_code(AclOperation, 3) == AclOperation.READ
    assert from_code(ResourceType, -5) == ResourceType.UNKNOWN


# --- principals and configuration ---


def test_principal_parsing() -> None:
    assert KafkaPrincipal.parse("User:alice") == KafkaPrincipal("User", "alice")
    assert KafkaPrincipal.parse("User:CN=a:b") == KafkaPrincipal("User", "CN=a:b")
    assert str(KafkaPrincipal.parse("Group:x")) == "Group:x"
    with pytest.raises(ValueError):
        KafkaPrincipal.parse("alice")


def test_configuration() -> None:
    assert parse_super_users(" User:alice ;User:chris;; ") == {"User:alice", "User:chris"}
    assert parse_super_users(None) == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("User:alice;bob")
    auth = Authorizer.from_config(
        {"super.users": "User:alice;User:chris", "allow.everyone.if.no.acl.found": "true"}
    )
    assert auth.super_users == {"User:alice", "User:chris"} and auth.allow_everyone_if_no_acl_found
    assert not Authorizer.from_config({}).allow_everyone_if_no_acl_found


# --- the API access table ---


def test_table_covers_every_served_api_and_the_security_apis() -> None:
    from shoal.broker.apis import ApiRegistry

    served = {api.api_key for api in ApiRegistry.default()}
    assert served <= set(API_ACCESS)
    for key in (
        ApiKey.DESCRIBE_ACLS,
        ApiKey.CREATE_ACLS,
        ApiKey.DELETE_ACLS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        ApiKey.ALTER_CLIENT_QUOTAS,
    ):
        assert API_ACCESS[key].checks


def test_table_entries_are_consistent() -> None:
    for key, access in API_ACCESS.items():
        for check in access.checks:
            if check.on_deny in (OnDeny.REQUEST, OnDeny.RESOURCE):
                assert check.grants and check.error != ErrorCode.NONE, key
            for grant in check.grants:
                # Kafka's DeleteTopics asks for DELETE on the cluster although AclEntry does not list it
                if (key, grant.resource, grant.operation) != (ApiKey.DELETE_TOPICS, RT.CLUSTER, Op.DELETE):
                    assert grant.operation in api_access_supported(grant.resource), (key, grant)
    for key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
        assert API_ACCESS[key].checks == ()


def api_access_supported(rt: RT) -> tuple[Op, ...]:
    from shoal.broker.security.authorizer import SUPPORTED_OPERATIONS

    return SUPPORTED_OPERATIONS[rt]


def test_table_special_cases() -> None:
    create = API_ACCESS[ApiKey.CREATE_TOPICS].checks[0]
    assert [(g.resource, g.operation, g.target) for g in create.grants] == [
        (RT.CLUSTER, Op.CREATE, Target.CLUSTER),
        (RT.TOPIC, Op.CREATE, Target.TOPICS),
    ]
    idempotent = API_ACCESS[ApiKey.INIT_PRODUCER_ID].checks[1]
    assert [(g.resource, g.operation, g.target) for g in idempotent.grants] == [
        (RT.CLUSTER, Op.IDEMPOTENT_WRITE, Target.CLUSTER),
        (RT.TOPIC, Op.WRITE, Target.ANY_OF_TYPE),
    ]
    assert idempotent.error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert API_ACCESS[ApiKey.PRODUCE].checks[0].error == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert [c.on_deny for c in API_ACCESS[ApiKey.METADATA].checks[:2]] == [OnDeny.RESOURCE, OnDeny.OMIT]
    assert API_ACCESS[ApiKey.LIST_GROUPS].checks[0].on_deny == OnDeny.OMIT
    assert api_access.config_grant(4, Op.ALTER_CONFIGS) == (
        api_access.Grant(RT.CLUSTER, Op.ALTER_CONFIGS, Target.CLUSTER),
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    )
    assert api_access.config_grant(32, Op.DESCRIBE_CONFIGS)[1] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert api_access.config_grant(0, Op.DESCRIBE_CONFIGS) is None
    assert api_access.coordinator_grant(1)[1] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_checks_evaluate_through_the_authorizer() -> None:
    auth = authorizer(acl(RT.TOPIC, "t", LITERAL, "User:bob", "*", Op.WRITE, ALLOW))
    idempotent = API_ACCESS[ApiKey.INIT_PRODUCER_ID].checks[1]
    assert api_access.check_allowed(auth, "User:bob", LOCAL, idempotent)  # WRITE on some topic
    assert not api_access.check_allowed(auth, "User:eve", LOCAL, idempotent)
    create = API_ACCESS[ApiKey.CREATE_TOPICS].checks[0]
    assert api_access.check_allowed(auth, "User:superman", LOCAL, create, "new")
    assert not api_access.check_allowed(auth, "User:bob", LOCAL, create, "new")
    with pytest.raises(ValueError):
        api_access.grant_allowed(auth, "User:bob", LOCAL, create.grants[1])
