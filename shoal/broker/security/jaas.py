"""Parse the ``sasl.jaas.config`` property the way Kafka's JaasConfig does.

Kafka reads the value with java.io.StreamTokenizer configured for ``//`` and ``/* */`` comments and
with ``-``, ``_`` and ``$`` as word characters. The tokenizer below reproduces the parts of that
class the grammar can meet: words, quoted strings with Java escapes, numbers (which are not strings,
so an unquoted value starting with a digit is "not specified"), comments and single characters.

Grammar: ``( loginModuleClass controlFlag (key '=' value)* ';' )+``
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

CONTROL_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_USER_PREFIX = "user_"
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\x0c", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}
_OCTAL = "01234567"


class JaasConfigError(ValueError):
    """The JAAS config text is not valid; the message is Kafka's where Kafka has one."""


@dataclass(frozen=True)
class JaasEntry:
    """One login module of a JAAS config: class name, upper-case control flag, and options."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Token:
    # ``kind`` is "word", "quoted", "number", "char" or "eof"; ``text`` is the string value of a
    # word or a quoted string (StreamTokenizer's sval) or the character itself for "char".
    kind: str
    text: str = ""

    @property
    def sval(self) -> str | None:
        return self.text if self.kind in ("word", "quoted") else None


_SEMICOLON = _Token("char", ";")
_EQUALS = _Token("char", "=")


def _is_word_char(c: str) -> bool:
    # StreamTokenizer's defaults (a-z, A-Z, U+00A0..U+00FF, and everything above U+00FF) plus the
    # three characters JaasConfig adds.
    o = ord(c)
    return c.isascii() and c.isalpha() or o >= 0xA0 or c in "-_$"


def _is_number_char(c: str) -> bool:
    return c.isdigit() and c.isascii() or c in ".-"


class _Tokenizer:
    """A java.io.StreamTokenizer as JaasConfig configures it, over a string."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def _peek(self, offset: int = 0) -> str:
        pos = self._pos + offset
        return self._text[pos] if pos < len(self._text) else ""

    def next_token(self) -> _Token:
        """The next token, or an "eof" token forever once the text is consumed."""
        while True:
            c = self._peek()
            if not c:
                return _Token("eof")
            if c <= " ":
                self._pos += 1
            elif c == "/":
                if not self._skip_comment():
                    return _Token("eof")
            elif _is_number_char(c):
                # Digits are checked before word characters, so "-" starts a number when a digit
                # or "." follows it, and is an ordinary character otherwise.
                nxt = self._peek(1)
                if c == "-" and not (nxt == "." or nxt.isascii() and nxt.isdigit()):
                    self._pos += 1
                    return _Token("char", "-")
                return self._number()
            elif _is_word_char(c):
                return self._word()
            elif c in "\"'":
                return self._quoted(c)
            else:
                self._pos += 1
                return _Token("char", c)

    def _skip_comment(self) -> bool:
        """Skip a comment starting at "/"; False if the text ends inside a block comment."""
        text = self._text
        if self._peek(1) == "*":
            end = text.find("*/", self._pos + 2)
            if end < 0:
                self._pos = len(text)
                return False
            self._pos = end + 2
            return True
        # "//" and, since "/" stays a comment character, a lone "/" both comment out the line.
        self._pos += 2
        while self._pos < len(text) and text[self._pos] not in "\r\n":
            self._pos += 1
        return True

    def _number(self) -> _Token:
        start = self._pos
        if self._peek() == "-":
            self._pos += 1
        seen_dot = False
        while True:
            c = self._peek()
            if c == "." and not seen_dot:
                seen_dot = True
            elif not (c and c.isascii() and c.isdigit()):
                break
            self._pos += 1
        return _Token("number", self._text[start : self._pos])

    def _word(self) -> _Token:
        start = self._pos
        while (c := self._peek()) and (_is_word_char(c) or _is_number_char(c)):
            self._pos += 1
        return _Token("word", self._text[start : self._pos])

    def _quoted(self, quote: str) -> _Token:
        # Like StreamTokenizer, a string also ends (silently) at a line break or the end of text.
        self._pos += 1
        out: list[str] = []
        while (c := self._peek()) and c not in (quote, "\n", "\r"):
            self._pos += 1
            out.append(self._escape() if c == "\\" else c)
        if self._peek() == quote:
            self._pos += 1
        return _Token("quoted", "".join(out))

    def _escape(self) -> str:
        c = self._peek()
        if not c:
            return "\uffff"  # Java appends (char) -1 for a backslash at the very end
        self._pos += 1
        if c not in _OCTAL:
            return _ESCAPES.get(c, c)
        # Up to three octal digits, the third only if the first is 0-3 (so at most \377).
        value = int(c)
        if self._peek() and self._peek() in _OCTAL:
            value = value * 8 + int(self._peek())
            self._pos += 1
            if self._peek() and self._peek() in _OCTAL and c <= "3":
                value = value * 8 + int(self._peek())
                self._pos += 1
        return chr(value)


def _control_flag(token: _Token) -> str:
    flag = token.sval
    if flag is None:
        raise JaasConfigError("Login module control flag is not available in the JAAS config")
    upper = flag.upper()
    if upper not in CONTROL_FLAGS:
        raise JaasConfigError(f"Invalid login module control flag '{flag}' in JAAS config")
    return upper


def _parse_entry(first: _Token, tokens: _Tokenizer) -> JaasEntry:
    login_module = first.sval
    if not login_module:
        # Java's AppConfigurationEntry rejects a missing module name without a message.
        raise JaasConfigError("Login module not specified in JAAS config")
    flag_token = tokens.next_token()
    if flag_token.kind == "eof":
        raise JaasConfigError("Login module control flag not specified in JAAS config")
    control_flag = _control_flag(flag_token)
    options: dict[str, str] = {}
    token = tokens.next_token()
    while token.kind != "eof" and token != _SEMICOLON:
        key = token.sval
        equals = tokens.next_token()
        value = tokens.next_token() if equals == _EQUALS else _Token("eof")
        if key is None or value.sval is None:
            raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
        options[key] = value.sval
        token = tokens.next_token()
    if token != _SEMICOLON:
        raise JaasConfigError("JAAS config entry not terminated by semi-colon")
    return JaasEntry(login_module, control_flag, options)


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Every login module entry of a ``sasl.jaas.config`` value, in order.

    Raises JaasConfigError for text Kafka's JaasConfig rejects.
    """
    tokens = _Tokenizer(text)
    entries: list[JaasEntry] = []
    token = tokens.next_token()
    while token.kind != "eof":
        entries.append(_parse_entry(token, tokens))
        token = tokens.next_token()
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def parse_listener_jaas_config(text: str) -> JaasEntry:
    """The single entry a broker listener's ``sasl.jaas.config`` must hold (Kafka's JaasContext)."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """User name to password from the ``user_<name>`` options of a PlainLoginModule entry."""
    return {key[len(_USER_PREFIX) :]: value for key, value in options.items() if key.startswith(_USER_PREFIX)}
