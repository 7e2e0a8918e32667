"""SCRAM credentials as the cluster metadata keeps them, and Kafka's rules for changing them.

AlterUserScramCredentials carries a salted password, never the password; the broker keeps only
the salt, the stored and server keys and the iteration count, as records of the metadata log
(Kafka's UserScramCredentialRecord and RemoveUserScramCredentialRecord). Validation and messages
are Kafka's ScramControlManager's; describing is its ScramImage's.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from shoal.broker.security.scram import MAX_ITERATIONS, MECHANISMS_BY_TYPE, MIN_ITERATIONS, ScramCredential
from shoal.protocol.errors import ErrorCode


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: int  # Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class UserResult:
    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramCredentials:
    """Every user's SCRAM credentials: (user, mechanism name) -> credential."""

    def __init__(self) -> None:
        self._by_user: dict[str, dict[str, ScramCredential]] = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._by_user.get(user, {}).get(mechanism)

    # -- the metadata log ------------------------------------------------------
    def apply(self, record: dict[str, Any]) -> None:
        """Replay one ``scram`` record (``op`` "upsert" or "delete")."""
        user, mechanism = record["user"], record["mechanism"]
        if record["op"] == "delete":
            creds = self._by_user.get(user, {})
            creds.pop(mechanism, None)
            if not creds:
                self._by_user.pop(user, None)
            return
        self._by_user.setdefault(user, {})[mechanism] = ScramCredential(
            base64.b64decode(record["salt"]), base64.b64decode(record["stored_key"]),
            base64.b64decode(record["server_key"]), int(record["iterations"]))

    def snapshot(self) -> Iterator[dict[str, Any]]:
        for user, creds in sorted(self._by_user.items()):
            for mechanism, cred in sorted(creds.items()):
                yield _upsert_record(user, mechanism, cred)

    def __len__(self) -> int:
        return sum(len(c) for c in self._by_user.values())

    # -- AlterUserScramCredentials ------------------------------------------------
    def alter(self, deletions: list[tuple[str, int]],
              upsertions: list[Upsertion]) -> tuple[list[UserResult], list[dict[str, Any]]]:
        """Validate a request as Kafka does: each user's result and the records to write (the
        caller writes and applies them). A user named twice fails with DUPLICATE_RESOURCE."""
        errors: dict[str, UserResult] = {}
        deletes: dict[str, tuple[str, int]] = {}
        upserts: dict[str, Upsertion] = {}
        duplicate = "A user credential cannot be altered twice in the same request"
        for user, mech in deletions:
            if user in errors:
                continue
            if deletes.pop(user, None) is not None:
                errors[user] = UserResult(user, ErrorCode.DUPLICATE_RESOURCE, duplicate)
                continue
            error = self._check_deletion(user, mech)
            if error is not None:
                errors[user] = error
            else:
                deletes[user] = (user, mech)
        for up in upsertions:
            if up.user in errors:
                continue
            if deletes.pop(up.user, None) is not None or upserts.pop(up.user, None) is not None:
                errors[up.user] = UserResult(up.user, ErrorCode.DUPLICATE_RESOURCE, duplicate)
                continue
            error = _check_upsertion(up)
            if error is not None:
                errors[up.user] = error
            else:
                upserts[up.user] = up
        records = [{"t": "scram", "op": "delete", "user": u, "mechanism": MECHANISMS_BY_TYPE[m]}
                   for u, m in deletes.values()]
        for up in upserts.values():
            name = MECHANISMS_BY_TYPE[up.mechanism]
            cred = ScramCredential.from_salted_password(name, up.salted_password, up.salt, up.iterations)
            records.append(_upsert_record(up.user, name, cred))
        results = [UserResult(u) for u in deletes] + [UserResult(u) for u in upserts] + list(errors.values())
        return results, records

    def _check_deletion(self, user: str, mechanism: int) -> UserResult | None:
        error = _check_name_and_mechanism(user, mechanism)
        if error is None and self.get(user, MECHANISMS_BY_TYPE[mechanism]) is None:
            return UserResult(user, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        return error

    # -- DescribeUserScramCredentials -------------------------------------------
    def describe(self, users: list[str] | None) -> list[tuple[UserResult, list[tuple[int, int]]]]:
        """Each user's (mechanism type, iterations); every user when ``users`` is None or empty."""
        if not users:
            users = sorted(self._by_user)
        seen: dict[str, bool] = {}
        for user in users:
            seen[user] = user in seen  # True: named twice
        out: list[tuple[UserResult, list[tuple[int, int]]]] = []
        for user, twice in seen.items():
            if twice:
                out.append((UserResult(user, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for "
                                       f"the same user twice in a single request: {user}"), []))
                continue
            creds = self._by_user.get(user)
            if not creds:
                out.append((UserResult(user, ErrorCode.RESOURCE_NOT_FOUND,
                                       f"Attempt to describe a user credential that does not exist: {user}"), []))
                continue
            infos = sorted((code, creds[name].iterations) for code, name in MECHANISMS_BY_TYPE.items()
                           if name in creds)
            out.append((UserResult(user), infos))
        return out


def _upsert_record(user: str, mechanism: str, cred: ScramCredential) -> dict[str, Any]:
    return {"t": "scram", "op": "upsert", "user": user, "mechanism": mechanism, "salt": _b64(cred.salt),
            "stored_key": _b64(cred.stored_key), "server_key": _b64(cred.server_key),
            "iterations": cred.iterations}


def _check_name_and_mechanism(user: str, mechanism: int) -> UserResult | None:
    if not user:
        return UserResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mechanism not in MECHANISMS_BY_TYPE:
        return UserResult(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def _check_upsertion(up: Upsertion) -> UserResult | None:
    error = _check_name_and_mechanism(up.user, up.mechanism)
    if error is not None:
        return error
    if up.iterations < MIN_ITERATIONS:
        return UserResult(up.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if up.iterations > MAX_ITERATIONS:
        return UserResult(up.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    return None
