"""Who a connection is: Kafka principals and the TLS certificate's name.

A PLAINTEXT connection (and a TLS one without a client certificate) is `User:ANONYMOUS`; a SASL
connection is `User:<authorization id>`; a TLS client certificate gives `User:<its subject>` in
RFC 2253 form (what Java's `X500Principal.getName()` prints), rewritten by the first of
`ssl.principal.mapping.rules` that matches, as Kafka's SslPrincipalMapper does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

ANONYMOUS = "User:ANONYMOUS"

# Java's names for the attribute types Python's ssl module spells out; others print as their OID.
_SHORT_NAMES = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "surname": "2.5.4.4",
         "givenName": "2.5.4.42", "title": "2.5.4.12"}


def _escape(value: str) -> str:
    """RFC 2253 escaping of an attribute value."""
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _der_ia5(value: str) -> str:
    """An attribute Java prints as OID=#<DER hex> (an IA5String or PrintableString)."""
    data = value.encode()
    tag = 0x16 if any(c in value for c in "@_") else 0x13
    return "#" + bytes([tag, len(data)]).hex() + data.hex()


def subject_dn(cert: dict[str, Any]) -> str:
    """The subject of a certificate (as `SSLObject.getpeercert()` gives it) in RFC 2253 order:
    most specific first, the reverse of the certificate's order, as Java prints it."""
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        parts = []
        for name, value in rdn:
            if name in _SHORT_NAMES:
                parts.append(f"{_SHORT_NAMES[name]}={_escape(value)}")
            else:
                parts.append(f"{_OIDS.get(name, name)}={_der_ia5(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        # Java's $1 back references become Python's \1 (literal backslashes kept)
        replacement = re.sub(r"\$(\d+)", r"\\\1", self.replacement.replace("\\", "\\\\"))
        result = self.pattern.sub(replacement, dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)"


class PrincipalMapper:
    """`ssl.principal.mapping.rules`: DEFAULT (the whole DN), or RULE:pattern/replacement/[LU]
    tried in order; a DN no rule matches is refused, as Kafka refuses it."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        for spec in _split(rules.strip() or "DEFAULT"):
            m = re.fullmatch(_RULE, spec)
            if m is None:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule: {spec}")
            if m.group(1):
                self.rules.append(_Rule(None))
            else:
                self.rules.append(_Rule(re.compile(m.group(2)), m.group(3), m.group(4)))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise ValueError(f"No rules apply to {dn}")


def _split(rules: str) -> list[str]:
    """Rules are separated by commas outside a RULE's pattern and replacement."""
    out = []
    pos = 0
    splitter = re.compile(r"\s*(" + _RULE + r"|[^,]*?)\s*(?:,\s*|$)")
    while pos < len(rules):
        m = splitter.match(rules, pos)
        if m is None or m.end() == pos:
            break
        if m.group(1):
            out.append(m.group(1))
        pos = m.end()
    return out
