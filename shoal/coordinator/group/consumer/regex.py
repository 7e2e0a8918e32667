"""Regular expression subscriptions (KIP-848 SubscribedTopicRegex) in Kafka's dialect.

Kafka compiles a member's regex with RE2/J (`com.google.re2j.Pattern`) and a topic is subscribed
when the *whole* name matches (`matcher(topic).matches()`). shoal checks the pattern against
RE2/J's syntax here and translates it to Python's `re` where the two differ, so that what RE2/J
refuses is refused with RE2/J's description (Kafka's INVALID_REGULAR_EXPRESSION message), and what
it accepts matches the same topic names:

- refused as RE2/J does: backreferences (`\\1`), lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`), atomic
  groups and other Perl constructs (`(?>`, `(?#`, `(?(`), possessive and nested repetitions (`a*+`,
  `a**`), repeat counts over 1000, flags other than `i m s U`, escapes RE2 does not know (`\\Z`,
  `\\u`, `\\C`, ...);
- translated: `\\Q...\\E` (quoted text), `\\z`, `\\x{...}`, `(?<name>` -> `(?P<name>`, POSIX classes
  `[[:alpha:]]`, `\\pL`/`\\p{Lu}` general categories, and flags set in the middle of a group
  (RE2 applies `(?i)` to the rest of the group, across `|`; Python only at the start);
- dropped: the flags `m`, `s` and `U` (no newline can be in a topic name, and greediness does not
  change whether a whole name matches).

Topic names are ASCII (`[a-zA-Z0-9._-]`), so classes are only needed over ASCII; Unicode scripts
(`\\p{Greek}`) are refused as unsupported by shoal rather than guessed.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

# RE2/J's parse error descriptions (PatternSyntaxException.getDescription()).
ERR_INVALID_CHAR_RANGE = "invalid character class range"
ERR_INVALID_ESCAPE = "invalid escape sequence"
ERR_INVALID_NAMED_CAPTURE = "invalid named capture"
ERR_INVALID_PERL_OP = "invalid or unsupported Perl syntax"
ERR_INVALID_REPEAT_OP = "invalid nested repetition operator"
ERR_INVALID_REPEAT_SIZE = "invalid repeat count"
ERR_MISSING_BRACKET = "missing closing ]"
ERR_MISSING_PAREN = "missing closing )"
ERR_MISSING_REPEAT_ARGUMENT = "missing argument to repetition operator"
ERR_TRAILING_BACKSLASH = "trailing backslash at end of expression"
ERR_DUPLICATE_NAMED_CAPTURE = "duplicate capture group name"
ERR_UNEXPECTED_PAREN = "unexpected )"
MAX_REPEAT = 1000

_ASCII = [chr(c) for c in range(128)]
_POSIX: dict[str, str] = {
    "alnum": string.ascii_letters + string.digits, "alpha": string.ascii_letters,
    "ascii": "".join(_ASCII), "blank": " \t", "cntrl": "".join(_ASCII[:32]) + "\x7f",
    "digit": string.digits, "graph": "".join(_ASCII[33:127]), "lower": string.ascii_lowercase,
    "print": "".join(_ASCII[32:127]), "punct": string.punctuation, "space": " \t\n\v\f\r",
    "upper": string.ascii_uppercase, "word": string.ascii_letters + string.digits + "_",
    "xdigit": string.hexdigits,
}
_SIMPLE_ESCAPES = set("afnrtv") | set("dDsSwW")
_ANCHOR_ESCAPES = {"A": r"\A", "z": r"\Z", "b": r"\b", "B": r"\B"}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z-]*)([:)])")
_NAME = re.compile(r"[A-Za-z0-9_]+")


class InvalidRegex(ValueError):
    """A pattern RE2/J would not compile; `description` is RE2/J's (or shoal's) reason."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


def _escaped(chars: Iterable[str]) -> str:
    return "".join(re.escape(c) if c not in "-" else r"\-" for c in chars)


def _class_of(chars: str, negated: bool) -> str:
    """A Python class for a set of ASCII characters (negated within ASCII: topic names are ASCII)."""
    members = sorted(set(_ASCII) - set(chars)) if negated else sorted(set(chars))
    return _escaped(members)


def _unicode_class(name: str) -> str:
    """The ASCII characters of a Unicode general category (`L`, `Lu`, `Nd`, ...) or `Any`."""
    if name == "Any":
        return "".join(_ASCII)
    if len(name) in (1, 2) and name[0] in "CLMNPSZ":
        return "".join(c for c in _ASCII if unicodedata.category(c).startswith(name))
    raise InvalidRegex(f"unsupported Unicode class \\p{{{name}}} (shoal knows general categories only)")


@dataclass
class _Group:
    wrappers: list[str] = field(default_factory=list)  # "(?i:" openings active to the group's end


class _Translator:
    """One pass over an RE2/J pattern, writing the Python pattern."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.groups = [_Group()]
        self.names: set[str] = set()
        self.last = "none"  # none | atom | repeat | lazy: what the previous item was

    def run(self) -> str:
        while self.i < len(self.p):
            self._step(self.p[self.i])
        if len(self.groups) > 1:
            raise InvalidRegex(ERR_MISSING_PAREN)
        self._close_wrappers()
        return "".join(self.out)

    def _step(self, c: str) -> None:
        if c == "\\":
            self._escape()
        elif c == "[":
            self._atom(self._char_class())
        elif c == "(":
            self._open()
        elif c == ")":
            self._close()
        elif c == "|":
            self._close_wrappers()
            self.out.append("|")
            self._reopen_wrappers()
            self.last = "none"
            self.i += 1
        elif c in "*+?":
            self._repeat(c, 1)
        elif c == "{" and (m := _REPEAT.match(self.p, self.i)):
            lo, hi = int(m.group(1)), m.group(3)
            if lo > MAX_REPEAT or (hi and (int(hi) > MAX_REPEAT or int(hi) < lo)):
                raise InvalidRegex(ERR_INVALID_REPEAT_SIZE)
            self._repeat(m.group(0), len(m.group(0)))
        elif c in "{}":  # not a repeat: a literal in RE2 (Python reads `{,n}` as one)
            self.i += 1
            self._atom("\\" + c)
        else:
            self.i += 1
            self._atom(c if c in ".^$" else re.escape(c))

    def _atom(self, text: str) -> None:
        self.out.append(text)
        self.last = "atom"

    def _repeat(self, op: str, width: int) -> None:
        if self.last == "none":
            raise InvalidRegex(ERR_MISSING_REPEAT_ARGUMENT)
        if self.last == "repeat" and op == "?":
            self.last = "lazy"
        elif self.last in ("repeat", "lazy"):
            raise InvalidRegex(ERR_INVALID_REPEAT_OP)
        else:
            self.last = "repeat"
        self.out.append(op)
        self.i += width

    # ------------------------------------------------------------ escapes
    def _escape(self) -> None:
        p, i = self.p, self.i
        if i + 1 >= len(p):
            raise InvalidRegex(ERR_TRAILING_BACKSLASH)
        c = p[i + 1]
        if c == "Q":
            end = p.find("\\E", i + 2)
            text = p[i + 2:] if end < 0 else p[i + 2:end]
            self.i = len(p) if end < 0 else end + 2
            for ch in text:  # each quoted character is an atom (a repeat after \Q..\E binds to the last)
                self._atom(re.escape(ch))
            return
        if c in _ANCHOR_ESCAPES:
            self.i += 2
            self._atom(_ANCHOR_ESCAPES[c])
            return
        self._atom(self._escape_in_class_or_not(in_class=False))

    def _escape_in_class_or_not(self, *, in_class: bool) -> str:
        """The Python text of the escape at self.i (a backslash), moving past it."""
        p, i = self.p, self.i
        if i + 1 >= len(p):
            raise InvalidRegex(ERR_TRAILING_BACKSLASH)
        c = p[i + 1]
        self.i = i + 2
        if c in _SIMPLE_ESCAPES:
            return "\\" + c
        if c in "pP":
            return self._unicode(c == "P", in_class)
        if c == "x":
            return re.escape(self._hex())
        if c == "0" or (c in "1234567" and i + 2 < len(p) and p[i + 2] in "01234567"):
            m = re.compile(r"[0-7]{1,3}").match(p, i + 1)
            assert m is not None
            self.i = m.end()
            return re.escape(chr(int(m.group(0), 8)))
        if c.isascii() and not c.isalnum():
            return re.escape(c)
        raise InvalidRegex(ERR_INVALID_ESCAPE)  # \1 (a backreference), \Z, \u, \C, \e ...

    def _hex(self) -> str:
        p, i = self.p, self.i
        if i < len(p) and p[i] == "{":
            end = p.find("}", i)
            digits = p[i + 1:end] if end > 0 else ""
            self.i = end + 1
        else:
            digits = p[i:i + 2]
            self.i = i + 2
            if len(digits) < 2:
                raise InvalidRegex(ERR_INVALID_ESCAPE)
        if not digits or any(d not in string.hexdigits for d in digits) or int(digits, 16) > 0x10FFFF:
            raise InvalidRegex(ERR_INVALID_ESCAPE)
        return chr(int(digits, 16))

    def _unicode(self, negated: bool, in_class: bool) -> str:
        p, i = self.p, self.i
        if i >= len(p):
            raise InvalidRegex(ERR_INVALID_CHAR_RANGE)
        if p[i] == "{":
            end = p.find("}", i)
            if end < 0:
                raise InvalidRegex(ERR_INVALID_CHAR_RANGE)
            name, self.i = p[i + 1:end], end + 1
            if name.startswith("^"):
                negated, name = not negated, name[1:]
        else:
            name, self.i = p[i], i + 1
        body = _class_of(_unicode_class(name), negated)
        return body if in_class else f"[{body}]" if body else r"[^\x00-\U0010ffff]"

    # ------------------------------------------------------------ classes
    def _char_class(self) -> str:
        p = self.p
        self.i += 1
        out = ["["]
        if self.i < len(p) and p[self.i] == "^":
            out.append("^")
            self.i += 1
        first = True
        while True:
            if self.i >= len(p):
                raise InvalidRegex(ERR_MISSING_BRACKET)
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and p.startswith("[:", self.i):
                out.append(self._posix())
            elif c == "\\":
                if self.i + 1 < len(p) and p[self.i + 1] in "bBAzQE":
                    raise InvalidRegex(ERR_INVALID_ESCAPE)
                out.append(self._escape_in_class_or_not(in_class=True))
            else:
                out.append("\\" + c if c in "[]&~|\\^" else c)
                self.i += 1
        text = "".join(out) + "]"
        return r"[^\x00-\U0010ffff]" if text == "[]" else "." if text == "[^]" else text

    def _posix(self) -> str:
        end = self.p.find(":]", self.i + 2)
        if end < 0:
            self.i += 1
            return r"\["
        name = self.p[self.i + 2:end]
        negated = name.startswith("^")
        chars = _POSIX.get(name[1:] if negated else name)
        if chars is None:
            raise InvalidRegex(ERR_INVALID_CHAR_RANGE)
        self.i = end + 2
        return _class_of(chars, negated)

    # ------------------------------------------------------------ groups and flags
    def _open(self) -> None:
        p, i = self.p, self.i
        if not p.startswith("(?", i):
            self._push("(", 1)
            return
        if p.startswith("(?P<", i) or (p.startswith("(?<", i) and not p.startswith(("(?<=", "(?<!"), i)):
            start = i + (4 if p[i + 2] == "P" else 3)
            end = p.find(">", start)
            name = p[start:end] if end > 0 else ""
            if end < 0 or not _NAME.fullmatch(name):
                raise InvalidRegex(ERR_INVALID_NAMED_CAPTURE)
            if name in self.names:
                raise InvalidRegex(ERR_DUPLICATE_NAMED_CAPTURE)
            self.names.add(name)
            self._push(f"(?P<{name}>", end + 1 - i)
            return
        m = _FLAGS.match(p, i)
        if m is None:
            raise InvalidRegex(ERR_INVALID_PERL_OP)
        python_flags = _flags(m.group(1))
        if m.group(2) == ":":
            self._push(f"(?{python_flags}:", m.end() - i)
            return
        self.i = m.end()
        if python_flags:  # RE2: the flags hold to the end of the enclosing group, across `|`
            opening = f"(?{python_flags}:"
            self.groups[-1].wrappers.append(opening)
            self.out.append(opening)
        self.last = "none"  # a flag group is no atom: a repeat after it has no argument

    def _push(self, opening: str, width: int) -> None:
        self.out.append(opening)
        self.groups.append(_Group())
        self.i += width
        self.last = "none"

    def _close(self) -> None:
        if len(self.groups) == 1:
            raise InvalidRegex(ERR_UNEXPECTED_PAREN)
        self._close_wrappers()
        self.groups.pop()
        self.out.append(")")
        self.i += 1
        self.last = "atom"

    def _close_wrappers(self) -> None:
        self.out.append(")" * len(self.groups[-1].wrappers))

    def _reopen_wrappers(self) -> None:
        self.out.extend(self.groups[-1].wrappers)


def _flags(text: str) -> str:
    """RE2's flag letters (`i m s U`, at most one `-`, not last) as Python's: only
    `i` matters for topic names."""
    if text.endswith("-") or text.count("-") > 1 or any(c not in "imsU-" for c in text):
        raise InvalidRegex(ERR_INVALID_PERL_OP)
    on, _, off = text.partition("-")
    if "i" in off:
        return "-i"
    return "i" if "i" in on else ""


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern[str]:
    """The Python pattern for an RE2/J one; InvalidRegex if RE2/J would refuse it."""
    translated = _Translator(pattern).run()
    try:
        return re.compile(translated)
    except re.error as e:  # what the pass above let through and Python still refuses
        raise InvalidRegex(_python_reason(e)) from None


def _python_reason(e: re.error) -> str:
    msg = str(e.msg)
    if "bad character range" in msg:
        return ERR_INVALID_CHAR_RANGE
    if "nothing to repeat" in msg:
        return ERR_MISSING_REPEAT_ARGUMENT
    if "multiple repeat" in msg:
        return ERR_INVALID_REPEAT_OP
    return msg


def invalid_regex_message(pattern: str) -> str | None:
    """Kafka's INVALID_REGULAR_EXPRESSION message for a pattern RE2/J refuses, None when valid."""
    try:
        compile_regex(pattern)
    except InvalidRegex as e:
        return f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e.description}."
    return None


def resolve(patterns: Iterable[str], topic_names: Iterable[str]) -> dict[str, frozenset[str]]:
    """Each pattern's topics: the names it matches whole (as Kafka, internal topics included:
    only a DESCRIBE ACL filter applies there). A pattern that does not compile resolves to nothing."""
    compiled: dict[str, re.Pattern[str] | None] = {}
    for pattern in patterns:
        try:
            compiled[pattern] = compile_regex(pattern)
        except InvalidRegex:
            compiled[pattern] = None
    if not compiled:
        return {}
    names = list(topic_names)
    return {pattern: frozenset(n for n in names if rx is not None and rx.fullmatch(n))
            for pattern, rx in compiled.items()}
