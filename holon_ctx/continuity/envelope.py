"""The ``continuity-envelope/v1`` schema and its total decoder.

The envelope is a msgspec Struct that forbids unknown fields: drift is what it exists to catch.
Decoding is *total*: :func:`decode_envelope` accepts anything (bytes, text, a mapping, garbage)
and returns the fields it could validate plus every finding, never an exception. It works field
by field rather than in one ``msgspec.convert`` call because msgspec stops at the first error and
the validator must report all of them (a malformed ``tenant_id`` must not hide a malformed
``idempotency_key``).

Identifier rules (:func:`id_problem`): non-empty, at most 256 characters, no surrounding
whitespace, no whitespace other than U+0020 inside, no control, format (zero-width, bidi),
surrogate or line/paragraph separator characters. Ids are never stripped, case-folded or
Unicode-normalised: ``"tenant-acme "`` and ``"tenant-аcme"`` (Cyrillic ``а``) are different ids,
and comparisons elsewhere are exact string equality.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final

import attrs
import msgspec

from holon_ctx.continuity.codes import ReasonCode
from holon_ctx.continuity.decision import Finding
from holon_ctx.errors import quote_value

__all__ = [
    "ENVELOPE_FIELDS",
    "ID_FIELDS",
    "ID_LIST_FIELDS",
    "MAX_ID_CHARS",
    "MAX_OBJECTIVE_CHARS",
    "OPTIONAL_ID_FIELDS",
    "SCHEMA_VERSION",
    "AuthorizationMode",
    "AwareDatetime",
    "DecodedEnvelope",
    "Envelope",
    "EventRange",
    "ResetReason",
    "SideEffectStatus",
    "check_field",
    "decode_envelope",
    "encode_envelope",
    "id_problem",
]

SCHEMA_VERSION: Final = "continuity-envelope/v1"
MAX_ID_CHARS: Final = 256
MAX_OBJECTIVE_CHARS: Final = 4096

#: An aware datetime; msgspec rejects naive timestamps at decode time.
AwareDatetime = Annotated[datetime, msgspec.Meta(tz=True)]


class ResetReason(StrEnum):
    """Why the context window was replaced (the seed's four boundaries)."""

    CONTEXT_COMPACTION = "context_compaction"
    CONTEXT_RESET = "context_reset"
    PROCESS_RECOVERY = "process_recovery"
    ROLE_HANDOFF = "role_handoff"


class AuthorizationMode(StrEnum):
    """Under whose authority the session acts."""

    USER_DELEGATED = "user_delegated"
    SERVICE_ACCOUNT = "service_account"
    OPERATOR = "operator"


class SideEffectStatus(StrEnum):
    """What is known about the external write named by the idempotency key."""

    NONE = "side_effect_none"  # nothing attempted yet
    COMMITTED = "side_effect_committed"  # confirmed applied
    NOT_APPLIED = "side_effect_not_applied"  # confirmed not applied (after reconciliation)
    UNKNOWN = "side_effect_unknown"  # may or may not have happened: reconcile, never retry
    PARTIAL = "side_effect_partial"  # some of it happened: reconcile, never retry


class EventRange(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Closed range of source event ids ``[first, last]`` that the summary was derived from."""

    first: str
    last: str


class Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """``continuity-envelope/v1``: control state kept outside the summary. Every field required."""

    schema_version: str
    envelope_id: str
    session_id: str
    source_trace_id: str
    reset_reason: ResetReason
    objective: str
    exact_constraint_refs: tuple[str, ...]
    pending_obligations: tuple[str, ...]
    tenant_id: str
    principal_id: str
    authorization_mode: AuthorizationMode
    delegated_principal_id: str | None
    delegated_scope: str | None
    policy_version: str
    capability_name: str | None
    capability_version: str | None
    approval_id: str | None
    action_digest: str | None
    approval_expires_at: AwareDatetime | None
    idempotency_key: str | None
    side_effect_status: SideEffectStatus
    checkpoint_ref: str
    sandbox_snapshot_ref: str | None
    budget_remaining: Annotated[int, msgspec.Meta(ge=0)]
    source_event_range: EventRange
    summary_sha256: str
    evidence_refs: tuple[str, ...]
    requires_reauthorization: bool


ENVELOPE_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in msgspec.structs.fields(Envelope))
_FIELD_TYPES: Final[dict[str, Any]] = {f.name: f.type for f in msgspec.structs.fields(Envelope)}

ID_FIELDS: Final = frozenset(
    {"envelope_id", "session_id", "source_trace_id", "tenant_id", "principal_id",
     "policy_version", "checkpoint_ref"}
)  # fmt: skip
OPTIONAL_ID_FIELDS: Final = frozenset(
    {"delegated_principal_id", "delegated_scope", "capability_name", "capability_version",
     "approval_id", "action_digest", "idempotency_key", "sandbox_snapshot_ref"}
)  # fmt: skip
ID_LIST_FIELDS: Final = frozenset({"exact_constraint_refs", "pending_obligations", "evidence_refs"})

_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}")
# Invisible or line-breaking categories: control, format (zero-width, bidi), surrogate, separators.
_FORBIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def id_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable identifier, or ``None``. Never repairs the value."""
    if not value:
        return "is empty"
    if len(value) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    if value != value.strip():
        return "has surrounding whitespace"
    for char in value:
        if unicodedata.category(char) in _FORBIDDEN_CATEGORIES:
            return f"contains control or invisible character U+{ord(char):04X}"
        if char.isspace() and char != " ":
            return f"contains whitespace character U+{ord(char):04X}"
    return None


def _objective_problem(value: str) -> str | None:
    if not value.strip():
        return "is empty"
    if len(value) > MAX_OBJECTIVE_CHARS:
        return f"is longer than {MAX_OBJECTIVE_CHARS} characters"
    for char in value:
        # Newlines and tabs are prose; other control characters (ANSI escapes) are not.
        if unicodedata.category(char) == "Cc" and char not in "\n\t":
            return f"contains control character U+{ord(char):04X}"
    return None


@attrs.frozen
class DecodedEnvelope:
    """What decoding produced: the fields that passed, the full Struct if all did, every finding."""

    fields: Mapping[str, Any]
    envelope: Envelope | None
    findings: tuple[Finding, ...]


class _DuplicateKeyError(ValueError):
    pass


def _pairs_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Duplicate keys are a parser-differential attack: two readers may pick different values.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(f"duplicate key {key!a}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _parse(raw: object) -> tuple[Mapping[Any, Any] | None, Finding | None]:
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, Finding(ReasonCode.ENVELOPE_UNDECODABLE, "$", f"not UTF-8: {exc.reason}")
    if isinstance(raw, str):
        try:
            raw = json.loads(
                raw, object_pairs_hook=_pairs_without_duplicates, parse_constant=_reject_constant
            )
        except (ValueError, RecursionError) as exc:
            return None, Finding(ReasonCode.ENVELOPE_UNDECODABLE, "$", f"not JSON: {exc}")
    if not isinstance(raw, Mapping):
        return None, Finding(
            ReasonCode.ENVELOPE_UNDECODABLE, "$", f"expected an object, got {type(raw).__name__}"
        )
    return raw, None


def _convert(name: str, value: object) -> tuple[Any, str | None]:
    try:
        return msgspec.convert(value, _FIELD_TYPES[name]), None
    except msgspec.ValidationError as exc:
        return None, str(exc)
    except Exception as exc:  # Totality: arbitrary objects may raise anything
        return None, f"cannot be read: {type(exc).__name__}"


def _value_problems(name: str, value: Any) -> list[tuple[str, str]]:
    """Semantic rules on one well-typed field: [(path, problem)]."""
    path = f"$.{name}"
    problems: list[tuple[str, str]] = []
    if name in ID_FIELDS or (name in OPTIONAL_ID_FIELDS and value is not None):
        problem = id_problem(value)
        if problem:
            problems.append((path, problem))
    elif name in ID_LIST_FIELDS:
        seen: set[str] = set()
        for index, item in enumerate(value):
            problem = id_problem(item) or ("is a duplicate" if item in seen else None)
            if problem:
                problems.append((f"{path}[{index}]", problem))
            seen.add(item)
    elif name == "source_event_range":
        for part in ("first", "last"):
            problem = id_problem(getattr(value, part))
            if problem:
                problems.append((f"{path}.{part}", problem))
    elif name == "objective":
        problem = _objective_problem(value)
        if problem:
            problems.append((path, problem))
    elif name == "summary_sha256" and not _DIGEST_RE.fullmatch(value):
        problems.append((path, "expected 'sha256:' followed by 64 lowercase hex digits"))
    return problems


def check_field(name: str, value: object) -> list[Finding]:
    """Findings for one field value, exactly as the decoder reports them (for writers)."""
    converted, error = _convert(name, value)
    if error is not None:
        return [Finding(ReasonCode.MALFORMED_FIELD, f"$.{name}", error)]
    return [
        Finding(ReasonCode.MALFORMED_FIELD, path, problem)
        for path, problem in _value_problems(name, converted)
    ]


def _consistency(fields: Mapping[str, Any]) -> list[Finding]:
    """Rules that tie fields together; checked only where every field involved decoded."""
    out: list[Finding] = []

    def have(*names: str) -> bool:
        return all(n in fields for n in names)

    def malformed(name: str, detail: str) -> None:
        out.append(Finding(ReasonCode.MALFORMED_FIELD, f"$.{name}", detail))

    if have("authorization_mode", "delegated_principal_id", "delegated_scope"):
        delegated = fields["authorization_mode"] is AuthorizationMode.USER_DELEGATED
        for name in ("delegated_principal_id", "delegated_scope"):
            if delegated and fields[name] is None:
                malformed(name, "required when authorization_mode is user_delegated")
            if not delegated and fields[name] is not None:
                malformed(name, "must be null unless authorization_mode is user_delegated")
    approval = ("approval_id", "action_digest", "approval_expires_at")
    if have(*approval) and len({fields[n] is None for n in approval}) > 1:
        malformed("approval_id", "approval_id, action_digest and approval_expires_at go together")
    if have("capability_name", "capability_version") and (
        (fields["capability_name"] is None) != (fields["capability_version"] is None)
    ):
        malformed("capability_version", "capability_name and capability_version go together")
    if have("approval_id", "capability_name") and (
        fields["approval_id"] is not None and fields["capability_name"] is None
    ):
        malformed("capability_name", "an approval is always bound to a capability")
    if have("idempotency_key", "side_effect_status") and (
        fields["idempotency_key"] is None and fields["side_effect_status"] is not SideEffectStatus.NONE
    ):
        malformed("idempotency_key", "a side effect without an idempotency key cannot be reconciled")
    return out


def decode_envelope(raw: object) -> DecodedEnvelope:
    """Decode anything into envelope fields and findings. Never raises."""
    try:
        return _decode(raw)
    except Exception as exc:  # Totality: a hostile Mapping may raise from anywhere
        finding = Finding(ReasonCode.ENVELOPE_UNDECODABLE, "$", f"cannot be read: {type(exc).__name__}")
        return DecodedEnvelope(fields={}, envelope=None, findings=(finding,))


def _key_path(key: object) -> str:
    return f"$.{key}" if isinstance(key, str) and key.isidentifier() else f"$[{ascii(key)[:80]}]"


def _decode(raw: object) -> DecodedEnvelope:
    obj, failure = _parse(raw)
    if obj is None:
        return DecodedEnvelope(fields={}, envelope=None, findings=(failure,) if failure else ())
    findings: list[Finding] = []
    for key in obj:
        if key not in _FIELD_TYPES:
            findings.append(Finding(ReasonCode.UNKNOWN_FIELD, _key_path(key), "not in the schema"))
    version = obj.get("schema_version", msgspec.UNSET)
    if version is msgspec.UNSET:
        findings.append(Finding(ReasonCode.SCHEMA_VERSION_MISSING, "$.schema_version"))
    elif not isinstance(version, str) or version != SCHEMA_VERSION:
        findings.append(
            Finding(
                ReasonCode.SCHEMA_VERSION_UNSUPPORTED,
                "$.schema_version",
                f"expected {quote_value(SCHEMA_VERSION)}, got {ascii(version)[:80]}",
            )
        )
    fields: dict[str, Any] = {}
    for name in ENVELOPE_FIELDS:
        if name == "schema_version":
            continue
        if name not in obj:
            findings.append(Finding(ReasonCode.MISSING_FIELD, f"$.{name}", "required"))
            continue
        value, error = _convert(name, obj[name])
        if error is not None:
            findings.append(Finding(ReasonCode.MALFORMED_FIELD, f"$.{name}", error))
            continue
        problems = _value_problems(name, value)
        for path, problem in problems:
            findings.append(Finding(ReasonCode.MALFORMED_FIELD, path, problem))
        if name == "requires_reauthorization" and value is not True:
            findings.append(Finding(ReasonCode.REAUTHORIZATION_FLAG_CLEARED, f"$.{name}", "must be true"))
        if not problems:
            fields[name] = value
    findings.extend(_consistency(fields))
    envelope = None
    if not findings:
        envelope = Envelope(schema_version=SCHEMA_VERSION, **fields)
    return DecodedEnvelope(fields=fields, envelope=envelope, findings=tuple(findings))


def encode_envelope(envelope: Envelope) -> bytes:
    """The canonical bytes of an envelope: what is stored, and what its sealed hash covers.

    Canonical form (RFC 0004, "Canonical encoding"): compact JSON, fields in the Struct's order,
    strings as UTF-8, ``approval_expires_at`` in UTC, and the set-valued fields (constraint refs,
    obligations: compared as sets) sorted. Encodings that decode to the same envelope have the
    same canonical bytes, so a migration or another JSON writer keeps a stored envelope valid.
    """
    expires = envelope.approval_expires_at
    return msgspec.json.encode(msgspec.structs.replace(
        envelope,
        approval_expires_at=None if expires is None else expires.astimezone(UTC),
        exact_constraint_refs=tuple(sorted(envelope.exact_constraint_refs)),
        pending_obligations=tuple(sorted(envelope.pending_obligations)),
    ))
