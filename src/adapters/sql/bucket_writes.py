"""sql-bucket's tag writes: conditional UPDATEs of a bucket's slots, and the spill side table.

A tag write (a revoke, deleters, readers, is_read, a purge) is one UPDATE of the bucket's
``msgs`` through the engine's JSON functions, whose WHERE clause holds each slot's
conditions and the bucket's inline budget, so a concurrent writer shows up as "0 rows
updated". Deleters beyond the budget live in the side table keyed (doc_id, slot, user_id).
``SqlBucketRepository`` inherits these primitives of the BucketRepository port.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Table, and_, delete, or_, select, text
from sqlalchemy.sql.elements import TextClause

from imbucket.adapters.codec import SlotCodec, conversation_of
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.json_sql import JsonSql, Path
from imbucket.adapters.sql.schema import SPILLING, check_key
from imbucket.adapters.sql.sizing import batches, value_bytes
from imbucket.domain.budget import BudgetConditions, TagBudget
from imbucket.domain.model import PURGED_SLOT, Revoke, SlotPatch
from imbucket.ports.bucket_repository import Spilled

# The SQL text one slot adds to a bucket write: its path, value expression and conditions.
SLOT_SQL_BYTES = 512
ROW_SQL_BYTES = 64  # a row of a multi-row INSERT: parentheses, separators, casts


class BucketTagWrites:
    """The tag writes of one bucket table (a base of ``SqlBucketRepository``)."""

    db: Database
    _codec: SlotCodec
    _json: JsonSql
    _table: str
    _spill: Table

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """Set the revoke of an unrevoked, unpurged slot."""
        change = ((slot, "revoke"), self._json.value("revoke"))
        unset = [self._json.is_null(slot, "revoke"), self._json.is_false(slot, "purged")]
        return self._update(
            doc_id, [change], unset, {"revoke": dumps(self._codec.revoke_doc(revoke))}
        )

    def patch(
        self, doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
    ) -> bool:
        """Apply tag changes in one UPDATE; a purged slot ignores every change but a purge.

        The budget is part of the UPDATE's WHERE clause, so it is checked against the row
        the UPDATE writes (a concurrent writer's change is seen, never overrun).
        """
        params: dict[str, Any] = {}
        changes, conditions = self._patching(patches, budget, params, "")
        return self._update(doc_id, changes, conditions, params)

    def patch_many(
        self,
        patches: Mapping[str, Mapping[int, SlotPatch]],
        budget: TagBudget | None = None,
        spills: Sequence[Spilled] = (),
    ) -> set[str] | None:
        """Every bucket's patch in one UPDATE (as many as the server's limits require).

        A CASE on doc_id picks each bucket's new msgs; the WHERE clause holds each bucket's
        own budget conditions.

        PostgreSQL and SQLite return the doc_ids updated; MariaDB (no RETURNING on an UPDATE)
        only how many, so a partial outcome there is None (see BucketRepository.patch_many).

        spills go in the same statement, added only to the side table of the buckets the
        UPDATE writes: a data-modifying CTE on PostgreSQL (the UPDATE's RETURNING feeds an
        INSERT … ON CONFLICT DO NOTHING); on SQLite and MariaDB the UPDATE sets each
        bucket's entries in its ``spilling`` column, which the schema's trigger on the
        bucket table moves to the side table and clears (``imbucket.adapters.sql.schema``).
        """
        if len(patches) == 1 and not spills:
            [(doc_id, only)] = patches.items()
            return {doc_id} if self.patch(doc_id, only, budget) else set()
        riding: dict[str, list[Spilled]] = {}
        for entry in spills:
            check_key(entry[2], "user_id")
            riding.setdefault(entry[0], []).append(entry)
        items = sorted(patches.items())
        sizes = [
            len(slots) * SLOT_SQL_BYTES
            + sum(value_bytes(user) + ROW_SQL_BYTES for _, _, user in riding.get(doc_id, ()))
            + ROW_SQL_BYTES
            for doc_id, slots in items
        ]
        most = max(len(riding.get(doc_id, ())) for doc_id, _ in items)
        per_bucket = 4 * max(len(slots) for _, slots in items) + 3 * most + 4  # bind parameters
        parts = list(batches(items, sizes, per_bucket, self.db.limits()))
        if len(parts) > 1:  # more than one statement allows: each part on its own
            outcomes = [
                self.patch_many(dict(part), budget, [e for d, _ in part for e in riding.get(d, ())])
                for part in parts
            ]
            found = [outcome for outcome in outcomes if outcome is not None]
            return None if len(found) < len(outcomes) else set().union(*found)
        return self._patch_buckets(patches, budget, riding)

    def _patch_buckets(
        self,
        patches: Mapping[str, Mapping[int, SlotPatch]],
        budget: TagBudget | None,
        riding: Mapping[str, Sequence[Spilled]],
    ) -> set[str] | None:
        """The one statement of patch_many: riding holds the side-table entries by doc_id."""
        params: dict[str, Any] = {}
        cases: list[str] = []
        spilling: list[str] = []
        matches: list[str] = []
        for n, (doc_id, slots) in enumerate(sorted(patches.items())):
            check_key(conversation_of(doc_id), "conversation_id")
            changes, conditions = self._patching(slots, budget, params, f"b{n}_")
            params[f"b{n}"] = doc_id
            cases.append(f"WHEN :b{n} THEN {self._json.set(changes) if changes else 'msgs'}")
            matches.append(all_of([f"doc_id = :b{n}", *conditions]))
            if riding.get(doc_id):
                params[f"b{n}_spilling"] = dumps([[i, user] for _, i, user in riding[doc_id]])
                spilling.append(f"WHEN :b{n} THEN :b{n}_spilling")
        document = f"CASE doc_id {' '.join(cases)} ELSE msgs END"
        if not riding:
            statement = f"UPDATE {self._table} SET msgs = {document} WHERE {any_of(matches)}"
        elif self.db.kind == "postgresql":
            statement = self._patching_spilling(document, any_of(matches), riding, params)
            return {row[0] for row in self.db.execute(text(statement), params).rows}
        else:  # the trigger moves the entries of the rows updated (and only those)
            spilled = f"CASE doc_id {' '.join(spilling)} END"
            statement = (
                f"UPDATE {self._table} SET msgs = {document}, {SPILLING} = {spilled}"
                f" WHERE {any_of(matches)}"
            )
        if self.db.kind == "mariadb":
            count = self.db.execute(text(statement), params).rowcount
            return set(patches) if count == len(patches) else set() if count == 0 else None
        rows = self.db.execute(text(statement + " RETURNING doc_id"), params).rows
        return {row[0] for row in rows}

    def _patching_spilling(
        self,
        document: str,
        where: str,
        riding: Mapping[str, Sequence[Spilled]],
        params: dict[str, Any],
    ) -> str:
        """PostgreSQL: the UPDATE of patch_many and the INSERT of its spills, one statement.

        A data-modifying CTE: the INSERT takes the entries of the doc_ids the UPDATE
        returns, and the statement returns those doc_ids.
        """
        rows: list[str] = []
        for m, (doc_id, index, user_id) in enumerate(e for es in riding.values() for e in es):
            params.update({f"s{m}d": doc_id, f"s{m}i": index, f"s{m}u": user_id})
            rows.append(f"(CAST(:s{m}d AS TEXT), CAST(:s{m}i AS INTEGER), CAST(:s{m}u AS TEXT))")
        return (
            f"WITH patched AS (UPDATE {self._table} SET msgs = {document} WHERE {where}"
            " RETURNING doc_id),"
            f" spilled AS (INSERT INTO {self._spill.name} (doc_id, slot, user_id)"
            f" SELECT s.doc_id, s.slot, s.user_id FROM (VALUES {', '.join(rows)})"
            " AS s (doc_id, slot, user_id)"
            " WHERE s.doc_id IN (SELECT p.doc_id FROM patched AS p)"
            " ON CONFLICT DO NOTHING)"
            " SELECT doc_id FROM patched"
        )

    def _patching(
        self,
        patches: Mapping[int, SlotPatch],
        budget: TagBudget | None,
        params: dict[str, Any],
        prefix: str,
    ) -> tuple[list[tuple[Path, str]], list[str]]:
        """The changes and WHERE conditions of one bucket's patch; its values go to params.

        A purged slot ignores every change but a purge; bind names start with prefix.
        """
        changes: list[tuple[Path, str]] = []
        for n, (index, patch) in enumerate(sorted(patches.items())):
            if patch.purge:
                params[f"{prefix}p{n}"] = dumps(self._codec.to_doc(PURGED_SLOT))
                changes.append(((index,), self._json.value(f"{prefix}p{n}")))
                continue
            purged = f"NOT ({self._json.is_false(index, 'purged')})"
            for name, user in (("del_list", patch.add_deleted_by), ("read_by", patch.add_read_by)):
                if user is not None:
                    key = f"{prefix}{name}{n}"
                    params[key] = user
                    changes.append(((index, name), self._json.added(index, name, key, purged)))
            if patch.set_read:
                changes.append(
                    ((index, "is_read"), self._json.true_unless(index, "is_read", purged))
                )
            if patch.mark_spilled:
                changes.append(((index, "spilled"), self._json.flag_unless(purged)))
        if budget is None:
            return changes, []
        return changes, self._within(budget.conditions(patches), params, prefix)

    def add_spilled(self, entries: Sequence[Spilled]) -> int:
        """INSERT the deleters, skipping the ones already there; how many were new."""
        for _, _, user_id in entries:
            check_key(user_id, "user_id")
        rows = [{"doc_id": d, "slot": i, "user_id": u} for d, i, u in entries]
        return self.db.execute(self.db.insert_ignore(self._spill).values(rows)).rowcount

    def read_spilled(
        self, wanted: Mapping[str, Sequence[int]], viewer: str | None = None
    ) -> dict[str, dict[int, set[str]]]:
        """One SELECT over the side table for all the given slots (by key for a viewer)."""
        spill = self._spill.c
        where = self._spilled_in(wanted)
        if viewer is not None:
            where = and_(where, spill.user_id == viewer)
        query = select(spill.doc_id, spill.slot, spill.user_id).where(where)
        found: dict[str, dict[int, set[str]]] = {}
        for doc_id, index, user_id in self.db.execute(query).rows:
            found.setdefault(doc_id, {}).setdefault(index, set()).add(user_id)
        return found

    def drop_spilled(self, wanted: Mapping[str, Sequence[int]]) -> None:
        """One DELETE over the side table for all the given slots."""
        self.db.execute(delete(self._spill).where(self._spilled_in(wanted)))

    def _within(
        self, within: BudgetConditions, params: dict[str, Any], prefix: str = ""
    ) -> list[str]:
        """The budget conditions as SQL for the UPDATE's WHERE clause."""
        conditions: list[str] = []
        budget = within.budget
        for index in within.deleting:
            conditions.append(f"{self._json.length(index, 'del_list')} < :{prefix}per_slot")
            params[f"{prefix}per_slot"] = budget.deleters_per_slot
        for index in within.reading:
            conditions.append(f"{self._json.length(index, 'read_by')} < :{prefix}readers")
            params[f"{prefix}readers"] = budget.readers_per_slot
        if within.deleting:
            added = len(within.deleting)
            conditions.append(f"{self._json.deleters} + {added} <= :{prefix}per_bucket")
            params[f"{prefix}per_bucket"] = budget.deleters_per_bucket
        return conditions

    def _spilled_in(self, wanted: Mapping[str, Sequence[int]]) -> ColumnElement[bool]:
        spill = self._spill.c
        return or_(
            *(
                and_(spill.doc_id == doc_id, spill.slot.in_(list(indexes)))
                for doc_id, indexes in wanted.items()
            )
        )

    def _update(
        self,
        doc_id: str,
        changes: Sequence[tuple[Path, str]],
        conditions: Sequence[str],
        params: dict[str, Any],
    ) -> bool:
        """UPDATE the bucket's msgs where all conditions hold; True if the row was updated."""
        statement = self._updating(doc_id, changes, conditions, params)
        return self.db.execute(statement).rowcount == 1

    def _updating(
        self,
        doc_id: str,
        changes: Sequence[tuple[Path, str]],
        conditions: Sequence[str],
        params: dict[str, Any],
    ) -> TextClause:
        """The UPDATE of the bucket's msgs where all conditions hold."""
        statement = text(self._update_sql(doc_id, changes, conditions))
        return statement.bindparams(doc_id=doc_id, **params)

    def _update_sql(
        self, doc_id: str, changes: Sequence[tuple[Path, str]], conditions: Sequence[str]
    ) -> str:
        """The SQL of ``_updating``, its values bound by name (``:doc_id`` and the changes')."""
        check_key(conversation_of(doc_id), "conversation_id")
        return self._update_sql_of(changes, conditions)

    def _update_sql_of(self, changes: Sequence[tuple[Path, str]], conditions: Sequence[str]) -> str:
        """The SQL of ``_update_sql``, for any bucket (bound as ``:doc_id``)."""
        document = self._json.set(changes) if changes else "msgs"
        return self._update_document_sql(document, conditions)

    def _update_document_sql(self, document: str, conditions: Sequence[str]) -> str:
        """UPDATE of the bucket bound as ``:doc_id``: msgs becomes document where all hold."""
        where = all_of(["doc_id = :doc_id", *conditions])
        return f"UPDATE {self._table} SET msgs = {document} WHERE {where}"


def all_of(conditions: Sequence[str]) -> str:
    """Conditions joined by AND as a balanced tree (SQLite caps expression depth at 1000)."""
    if len(conditions) == 1:
        return conditions[0]
    middle = len(conditions) // 2
    return f"({all_of(conditions[:middle])} AND {all_of(conditions[middle:])})"


def any_of(conditions: Sequence[str]) -> str:
    """Conditions joined by OR as a balanced tree (like ``all_of``)."""
    if len(conditions) == 1:
        return conditions[0]
    middle = len(conditions) // 2
    return f"({any_of(conditions[:middle])} OR {any_of(conditions[middle:])})"


def dumps(value: object) -> str:
    """JSON text of value, compact and non-ASCII kept, as the engines' JSON functions write."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
