"""Prepared statements bind as SQLAlchemy's own parameter construction does, on every dialect.

``Prepared.params`` picks the values itself when that is all ``construct_params`` would do;
these check it against ``construct_params`` for binds given, constants collected at compile
time, a value processed by its type, and a bind missing.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Boolean, Column, Integer, MetaData, String, Table, bindparam, text
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.exc import InvalidRequestError

from imbucket.adapters.sql.prepared import Prepared

_TABLE = Table("t", MetaData(), Column("a", String), Column("b", Integer), Column("c", Boolean))
DIALECTS = [sqlite.dialect(), mysql.dialect(), postgresql.dialect()]
STATEMENTS = {
    "constants and a processed bool": _TABLE.insert().values(
        a=bindparam("a"), b=0, c=bindparam("c")
    ),
    "text": text("SELECT :a, :b WHERE :c"),
}


def expected(prepared: Prepared, given: dict[str, Any]) -> Any:
    """What the driver got before: construct_params, the processors, the positional order."""
    compiled: Any = prepared._compiled
    full = compiled.construct_params(given)
    for name, process in compiled._bind_processors.items():
        if name in full:
            full[name] = process(full[name])
    return tuple(full[n] for n in compiled.positiontup) if compiled.positional else full


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize("statement", STATEMENTS.values(), ids=STATEMENTS.keys())
def test_params_are_those_sqlalchemy_would_build(dialect: Any, statement: Any) -> None:
    prepared = Prepared(statement, dialect)
    given = {"a": "x", "b": 7, "c": True, "unused": 1}
    assert prepared._binds is not None  # the statements of a send take the fast path
    assert prepared.params(given) == expected(prepared, given)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_a_missing_value_is_sqlalchemys_error(dialect: Any) -> None:
    prepared = Prepared(STATEMENTS["constants and a processed bool"], dialect)
    with pytest.raises(InvalidRequestError, match="A value is required for bind parameter 'a'"):
        prepared.params({"c": True})
