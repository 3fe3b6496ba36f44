"""Addressing (seq to bucket and slot) and its check table."""

from __future__ import annotations

import pytest

from imbucket.domain.errors import InvalidArgument, InvalidSeq
from imbucket.domain.layout import BucketLayout


@pytest.mark.parametrize(
    ("seq", "doc_index", "slot_index"),
    [(1, 0, 0), (100, 0, 99), (101, 1, 0), (200, 1, 99), (201, 2, 0)],
)
def test_check_table(seq: int, doc_index: int, slot_index: int) -> None:
    layout = BucketLayout()
    assert layout.doc_index(seq) == doc_index
    assert layout.slot_index(seq) == slot_index
    assert layout.doc_id("sg_g1", seq) == f"sg_g1:{doc_index}"
    assert layout.first_seq(doc_index) + slot_index == seq


@pytest.mark.parametrize("bad", [0, -1, -100, True, False, 1.0, "1", None, 2.5])
def test_rejects_anything_but_positive_ints(bad: object) -> None:
    layout = BucketLayout()
    for method in (layout.doc_index, layout.slot_index):
        with pytest.raises(InvalidSeq):
            method(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidSeq):
        layout.doc_id("c", bad)  # type: ignore[arg-type]


def test_first_seq_of_each_bucket() -> None:
    assert [BucketLayout().first_seq(i) for i in range(3)] == [1, 101, 201]
    assert BucketLayout(size=10).first_seq(2) == 21
    with pytest.raises(InvalidArgument):
        BucketLayout().first_seq(-1)


def test_group_orders_docs_ascending_and_keeps_input_order_inside() -> None:
    grouped = BucketLayout().group("c", [250, 3, 101, 1, 199, 2])
    assert list(grouped) == ["c:0", "c:1", "c:2"]
    assert grouped == {"c:0": [3, 1, 2], "c:1": [101, 199], "c:2": [250]}


def test_group_sorts_doc_indexes_numerically_not_as_strings() -> None:
    grouped = BucketLayout(size=1).group("c", [11, 2])
    assert list(grouped) == ["c:1", "c:10"]


def test_other_sizes_address_consistently() -> None:
    layout = BucketLayout(size=7)
    for seq in range(1, 50):
        assert layout.first_seq(layout.doc_index(seq)) + layout.slot_index(seq) == seq


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_bucket_size_must_be_a_positive_int(size: object) -> None:
    with pytest.raises(InvalidArgument):
        BucketLayout(size=size)  # type: ignore[arg-type]
