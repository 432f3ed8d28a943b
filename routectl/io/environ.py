"""An environment mapping a library caller passes (`routectl.resolve`, `routectl.start`):
checked once at the entry and copied, so that resolution reads a plain `dict[str, str]` and a
caller's odd mapping fails with one InputError naming the offending key, never a bare
TypeError or KeyError from deep inside."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routectl.errors import InputError
from routectl.io.jsonread import shorten


def checked_environ(environ: Any) -> dict[str, str]:
    """A copy of `environ` once every key and value is a `str`; an InputError otherwise (not
    a mapping, a key or value of another type, a mapping whose iteration or lookup raises)."""
    if not isinstance(environ, Mapping):
        raise InputError(
            f"environ must be a mapping of variable names to values (str to str), got "
            f"{type(environ).__name__}"
        )
    try:
        keys = list(environ)
    except Exception as exc:  # noqa: BLE001 - the caller's mapping: any failure is its input
        raise InputError(
            f"environ cannot be iterated: {type(exc).__name__}: {shorten(str(exc))}"
        ) from None
    copied: dict[str, str] = {}
    for key in keys:
        if not isinstance(key, str):
            raise InputError(
                f"environ key {shorten(key)} is a {type(key).__name__}; variable names are str"
            )
        try:
            value = environ[key]
        except Exception as exc:  # noqa: BLE001 - as above
            raise InputError(
                f"environ[{shorten(key)}] raised {type(exc).__name__}: {shorten(str(exc))}"
            ) from None
        if not isinstance(value, str):
            raise InputError(
                f"environ[{shorten(key)}] is a {type(value).__name__} ({shorten(value)}); "
                f"variable values are str"
            )
        copied[key] = value
    return copied
