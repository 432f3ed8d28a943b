"""Builds the Pydantic user-intent model (KernelConfig) from a field table, so every field is
declared once, as data. Every field is optional: None means "not set".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic import Field as PydanticField

from routectl.errors import InputError
from routectl.io.jsonread import QUOTE_CHARS, parse_json, read_bytes, shorten
from routectl.policy.fields import Field
from routectl.suggest import did_you_mean

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def build_config_model(fields: Sequence[Field], name: str = "KernelConfig") -> type[BaseModel]:
    sections: dict[str, dict[str, Any]] = {}
    engine: dict[str, Any] = {}
    for f in fields:
        spec = (Optional[f.type], PydanticField(None, description=f.doc))  # noqa: UP045
        if f.section is None:
            engine[f.name] = spec
        else:
            sections.setdefault(f.section, {})[f.name] = spec
    members: dict[str, Any] = dict(engine)
    for section, section_fields in sections.items():
        model = create_model(f"{_camel(section)}Config", __config__=_STRICT, **section_fields)
        members[section] = (model, PydanticField(default_factory=model))
    return create_model(name, __config__=_STRICT, **members)


# A config with thousands of wrong keys makes thousands of errors: the first few say enough.
MAX_DESCRIBED = 3


def config_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key a config model takes, dotted (`sm70_awq`, `sm70_awq.prefill_exact_dense`)."""
    keys = []
    for name, info in model.model_fields.items():
        keys.append(prefix + name)
        inner = info.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            keys.extend(config_keys(inner, f"{prefix}{name}."))
    return keys


def _describe(error: ValidationError, model: type[BaseModel]) -> str:
    parts = []
    items = error.errors()
    for item in items[:MAX_DESCRIBED]:
        where = ".".join(str(p) for p in item["loc"])
        typed = where
        if len(where) > QUOTE_CHARS:
            where = f"{where[:QUOTE_CHARS]}... ({len(where):,} characters)"
        if item["type"] == "extra_forbidden":
            # Pydantic says "Extra inputs are not permitted": name the key meant, with its path.
            hint = did_you_mean(typed, config_keys(model)).replace("mean ", "mean kernel_config.")
            parts.append(f"kernel_config.{where}: unknown key{hint}")
            continue
        got = item.get("input")
        shown = "" if isinstance(got, dict) else f" (got {shorten(got)})"
        parts.append(f"kernel_config.{where}: {item['msg']}{shown}")
    if len(items) > MAX_DESCRIBED:
        parts.append(f"and {len(items) - MAX_DESCRIBED} more")
    return "; ".join(parts)


def _forgotten_at(value: str) -> None:
    """A value that is no JSON text but names an existing file was meant as `@file`."""
    text = value.strip()
    if text and text[0] not in '{["' and len(text) < 4096 and Path(text).is_file():
        raise InputError(
            f"kernel config {shorten(text)} is not JSON text but names a file; did you mean "
            f"@{text}?"
        )


def load_config(model: type[BaseModel], value: Any) -> BaseModel:
    """Build a config from kwargs (a mapping), a JSON text, or `@path` to a JSON file (read
    and checked by the one bounded JSON reader before the model sees it)."""
    try:
        if value is None:
            return model()
        if isinstance(value, BaseModel):
            return model.model_validate(value.model_dump())
        if isinstance(value, str):
            if value.startswith("@"):
                path = Path(value[1:])
                if not value[1:]:
                    raise InputError("kernel config @FILE names no file (write @path/to.json)")
                raw = read_bytes(path, "kernel config")
                parse_json(raw, f"kernel config {path}")
            else:
                raw = value.encode("utf-8", "surrogatepass")
                _forgotten_at(value)
                parse_json(raw, "kernel config")
            return model.model_validate_json(raw)
        return model.model_validate(value)
    except ValidationError as exc:
        raise InputError(_describe(exc, model)) from None


def typed_values(config: BaseModel, fields: Sequence[Field]) -> dict[str, Any]:
    """Field key -> explicit value (None where unset)."""
    out: dict[str, Any] = {}
    for f in fields:
        holder: Any = config if f.section is None else getattr(config, f.section)
        out[f.key] = getattr(holder, f.name)
    return out
