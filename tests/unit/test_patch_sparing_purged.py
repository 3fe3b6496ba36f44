"""domain.tags.patch_sparing_purged: the rule every bucket store's conditional tag patch follows."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import Slot, SlotPatch
from imbucket.domain.tags import patch_sparing_purged

DELETE = SlotPatch(add_deleted_by="bob")


class Bucket:
    """A bucket whose patch matches only when no target slot is purged (and within budget)."""

    def __init__(self, purged: set[int], over_budget: bool = False, exists: bool = True) -> None:
        self.purged, self.over_budget, self.present = purged, over_budget, exists
        self.tried: list[list[int]] = []

    def update(self, patches: Mapping[int, SlotPatch]) -> bool:
        self.tried.append(sorted(patches))
        return self.present and not self.over_budget and not (set(patches) & self.purged)

    def read(self, slots: list[int]) -> dict[int, Slot] | None:
        if not self.present:
            return None
        return {i: Slot(purged=True) if i in self.purged else Slot() for i in slots}


def run(bucket: Bucket, patches: Mapping[int, SlotPatch]) -> bool:
    return patch_sparing_purged("d", patches, bucket.update, bucket.read, lambda: bucket.present)


def test_purged_targets_are_dropped_and_the_rest_written() -> None:
    bucket = Bucket(purged={3})
    assert run(bucket, {1: DELETE, 3: DELETE}) is True
    assert bucket.tried == [[1, 3], [1]]


def test_a_refused_budget_or_a_missing_bucket_is_false() -> None:
    assert run(Bucket(purged=set(), over_budget=True), {1: DELETE}) is False
    assert run(Bucket(purged=set(), exists=False), {1: DELETE}) is False


def test_every_target_purged_answers_whether_the_bucket_exists() -> None:
    bucket = Bucket(purged={1, 2})
    assert run(bucket, {1: DELETE, 2: DELETE}) is True
    assert bucket.tried == [[1, 2]]


def test_a_purge_patch_is_never_dropped() -> None:
    bucket = Bucket(purged={1})
    bucket.update = lambda patches: False  # type: ignore[method-assign]
    assert run(bucket, {1: SlotPatch(purge=True)}) is False  # read, nothing to drop: refused


def test_a_patch_that_never_settles_is_store_unavailable() -> None:
    # Each round another writer purges one more target: the patch shrinks and never lands.
    flapping = Bucket(purged=set())
    flapping.update = lambda patches: False  # type: ignore[method-assign]
    flapping.read = lambda slots: {  # type: ignore[method-assign]
        i: Slot(purged=i == slots[0]) for i in slots
    }
    with pytest.raises(StoreUnavailable, match="did not settle"):
        run(flapping, {i: DELETE for i in range(2000)})
