"""Which pip extra installs each optional driver, so that a missing one says how to get it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from imbucket.domain.errors import ConfigError

# Top-level module -> the extra of ``pip install 'imbucket[extra]'`` that installs it.
EXTRAS: dict[str, str] = {
    "psycopg": "postgres",
    "psycopg_binary": "postgres",
    "pymysql": "mariadb",
    "pymongo": "mongo",
    "bson": "mongo",
    "redis": "redis",
    "hdrh": "bench",
    "numpy": "bench",
    "matplotlib": "bench",
}


def missing(error: ImportError, what: str) -> ConfigError:
    """The ConfigError for what (e.g. "store backend 'mongo-row'") failing to import a module.

    Names the extra that installs the module when it is an optional driver.
    """
    module = (error.name or "").split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return ConfigError(f"{what} cannot be used: {error}")
    return ConfigError(
        f"{what} needs the {module!r} package, which is not installed: "
        f"pip install 'imbucket[{extra}]'"
    )


@contextmanager
def needs_extra(what: str) -> Iterator[None]:
    """Turn a ModuleNotFoundError raised in the block into ``missing``'s ConfigError."""
    try:
        yield
    except ModuleNotFoundError as error:
        raise missing(error, what) from None
