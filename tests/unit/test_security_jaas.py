"""The sasl.jaas.config parser, against Kafka's JaasConfig (java.io.StreamTokenizer) rules."""

from __future__ import annotations

import pytest

from shoal.broker.security.jaas import (
    PLAIN_LOGIN_MODULE,
    JaasConfigError,
    JaasEntry,
    parse_jaas_config,
    parse_listener_jaas_config,
    plain_users,
)


def test_plain_module_with_users() -> None:
    entry = parse_listener_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
    )
    assert entry == JaasEntry(
        PLAIN_LOGIN_MODULE,
        "REQUIRED",
        {
            "username": "admin",
            "password": "admin-secret",
            "user_admin": "admin-secret",
            "user_alice": "alice-secret",
        },
    )
    assert plain_users(entry.options) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_several_modules_flags_and_whitespace() -> None:
    entries = parse_jaas_config(
        "a.B optional;\n  c.D  Sufficient key=value\tother = 'single quoted' ;x.Y REQUISITE k=$v-1_2;"
    )
    assert [(e.login_module, e.control_flag) for e in entries] == [
        ("a.B", "OPTIONAL"),
        ("c.D", "SUFFICIENT"),
        ("x.Y", "REQUISITE"),
    ]
    assert entries[0].options == {}
    # Unquoted words may hold letters, digits after the first character, ".", "-", "_" and "$".
    assert entries[1].options == {"key": "value", "other": "single quoted"}
    assert entries[2].options == {"k": "$v-1_2"}


def test_quoted_escapes() -> None:
    (entry,) = parse_jaas_config(
        r'M required a="quote \" here" b="back\\slash" c="tab\tnl\n" d="\101\0612" e="\q" f="semi;colon=eq";'
    )
    assert entry.options == {
        "a": 'quote " here',
        "b": "back\\slash",
        "c": "tab\tnl\n",
        "d": "A12",  # \101 is "A"; \061 is "1" and the "2" after it is literal
        "e": "q",
        "f": "semi;colon=eq",
    }


def test_octal_escape_stops_after_two_digits_above_three() -> None:
    (entry,) = parse_jaas_config(r'M required v="\477";')
    assert entry.options == {"v": "\x277"}  # \47 then a literal 7, as in Java


def test_comments_are_skipped() -> None:
    entries = parse_jaas_config(
        '// leading comment\nM /* inline */ required /* multi\nline */ k="v"; // trailing\n'
    )
    assert entries == [JaasEntry("M", "REQUIRED", {"k": "v"})]


def test_last_duplicate_option_wins() -> None:
    assert parse_jaas_config('M required k="1" k="2";')[0].options == {"k": "2"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified in JAAS config"),
        ("   // only a comment", "Login module not specified in JAAS config"),
        ("M", "Login module control flag not specified in JAAS config"),
        ("M ;", "Login module control flag is not available in the JAAS config"),
        ("M mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
        ("M required", "JAAS config entry not terminated by semi-colon"),
        ('M required k="v"', "JAAS config entry not terminated by semi-colon"),
        ("M required k;", "Value not specified for key 'k' in JAAS config"),
        ("M required k=;", "Value not specified for key 'k' in JAAS config"),
        ("M required k=", "Value not specified for key 'k' in JAAS config"),
        # An unquoted value starting with a digit is a number to StreamTokenizer, not a string.
        ("M required k=123;", "Value not specified for key 'k' in JAAS config"),
        ('M required k="unterminated;', "JAAS config entry not terminated by semi-colon"),
        ("M required /* never closed k=v;", "JAAS config entry not terminated by semi-colon"),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError) as info:
        parse_jaas_config(text)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_listener_config_needs_exactly_one_module() -> None:
    with pytest.raises(JaasConfigError, match="contains 2 login modules, should be 1 module"):
        parse_listener_jaas_config("A required; B required;")


def test_plain_users_only_from_user_prefix() -> None:
    assert plain_users({"username": "x", "user_": "empty", "user_bob": "b", "users_x": "no"}) == {
        "": "empty",
        "bob": "b",
    }
