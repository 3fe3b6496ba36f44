"""The configuration reference (docs/configuration.md), generated from the settings model.

``python -m imbucket.app.settings_doc > docs/configuration.md`` writes it; a unit test fails
when the committed page differs, so the page always lists every key, its type, default,
bounds and description as :mod:`imbucket.app.settings` defines them.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from imbucket.app.settings import ENV_PREFIX, Settings

REGENERATE = "python -m imbucket.app.settings_doc > docs/configuration.md"

_INTRO = f"""\
# Configuration reference

For operators: every settings key, its type, default and bounds, and how to set it.

<!-- Generated from imbucket.app.settings by `{REGENERATE}`; do not edit by hand. -->

`open_service(config)` (and `load_settings(config)`) merges `config` over the settings, which
come from, lowest first: the defaults below, a TOML or JSON file named by `IMBUCKET_CONFIG`,
and environment variables `{ENV_PREFIX}<SECTION>__<KEY>`
(e.g. `IMBUCKET_STORE__BACKEND=sql-bucket`). The CLI's `--config FILE` is merged over those,
like `config`. A key that names no setting, at any level and from any source, is a
`ConfigError` naming it and the closest setting; so is an invalid value, and settings whose
bucket cannot fit `store.max_bucket_bytes`.

```toml
# settings.toml, used as IMBUCKET_CONFIG=settings.toml or --config settings.toml
[store]
backend = "sql-bucket"
url = "postgresql+psycopg://app@db.internal:5432/chat"

[cache]
backend = "redis"
url = "redis://cache.internal:6379/0"
```
"""


def render() -> str:
    """The whole reference page as Markdown, one section per settings group."""
    parts = [_INTRO]
    for name, field in Settings.model_fields.items():
        section = field.annotation
        assert isinstance(section, type) and issubclass(section, BaseModel)
        parts.append(_section(name, section))
    return "\n".join(parts)


def _section(name: str, model: type[BaseModel]) -> str:
    """The heading, description and key table of one settings group."""
    lines = [
        f"## `{name}`",
        "",
        " ".join((model.__doc__ or "").split()),
        "",
        "| key | type | default | bounds | environment variable |",
        "|---|---|---|---|---|",
    ]
    notes = []
    for key, info in model.model_fields.items():
        env = f"{ENV_PREFIX}{name.upper()}__{key.upper()}"
        cells = [f"`{name}.{key}`", _type_of(info), _default(info.default)]
        lines.append("| " + " | ".join([*cells, _bounds(info), f"`{env}`"]) + " |")
        notes.append(f"- `{name}.{key}`: {info.description or ''}")
    return "\n".join([*lines, "", *notes, ""])


def _type_of(info: FieldInfo) -> str:
    """A field's type, or the names it may take (a registry's, given as ``choices``)."""
    extra = info.json_schema_extra
    choices = extra.get("choices") if isinstance(extra, dict) else None
    if isinstance(choices, list):
        return " \\| ".join(f'`"{choice}"`' for choice in choices)
    return _type(info.annotation)


def _type(annotation: Any) -> str:
    """A type as a reader writes it: int, float, str, one of listed values, or unset."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{value!r}`".replace("'", '"') for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " \\| ".join(
            "unset" if arg is type(None) else _type(arg) for arg in get_args(annotation)
        )
    return getattr(annotation, "__name__", str(annotation))


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    return f"`{value!r}`".replace("'", '"')


def _bounds(info: FieldInfo) -> str:
    """The numeric bounds pydantic checks, e.g. ``1 ≤ x ≤ 1000``; a dash if none."""
    low = high = ""
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low = f"{item.ge} ≤ "
        elif isinstance(item, annotated_types.Gt):
            low = f"{item.gt} < "
        elif isinstance(item, annotated_types.Le):
            high = f" ≤ {item.le}"
        elif isinstance(item, annotated_types.Lt):
            high = f" < {item.lt}"
    return f"{low}x{high}" if low or high else "–"


if __name__ == "__main__":
    print(render(), end="")
