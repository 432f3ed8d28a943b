"""Structured reasons and verdicts: a stable code plus a message with the offending values."""

from __future__ import annotations

from typing import Any, NamedTuple


class Reason(NamedTuple):
    code: str
    message: str

    def __str__(self) -> str:
        return self.message


# (ok, reason): reason is None exactly when ok is True.
Check = tuple[bool, Reason | None]

OK: Check = (True, None)


def reject(code: str, message: str) -> Check:
    return (False, Reason(code, message))


class Verdict(NamedTuple):
    """One candidate's outcome in a selection, in priority order. A named tuple: selection
    makes one per candidate per call, several times cheaper than a frozen dataclass."""

    name: str
    ok: bool
    code: str | None = None
    message: str | None = None
    not_needed: bool = False
    # The stage at which the candidate was rejected: policy, qualification, disabled,
    # capability, ops, workspace, abi. Only capability-like stages make a fallback.
    stage: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "code": self.code,
            "message": self.message,
            "not_needed": self.not_needed,
        }


def missing_ops_reason(label: str, missing: list[str] | tuple[str, ...]) -> Reason:
    """The one spelling of a missing-operator reason, shared by every kernel and stage."""
    names = ", ".join(missing)
    prefix = f"missing native {label} operators" if label else "missing native operators"
    return Reason("missing_native_ops", f"{prefix}: [{names}]")


# --- text forms ----------------------------------------------------------------------------
# The one way every human-readable output (explain, config, the startup report, the matrix
# views) spells a reason and a refused candidate. A row's own data (error messages, which
# may quote refusals) is not text output: snapshots keep its bytes.


def reason_text(code: str | None, message: str | None) -> str:
    """A reason: `[code] message`."""
    return f"[{code}] {message}"


def refusal_text(name: str, code: str | None, message: str | None) -> str:
    """A refused candidate: `name [code] message`."""
    return f"{name} {reason_text(code, message)}"
