"""The memory-budget and scale-curve runs' inputs and readings (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imbucket.bench import instances
from imbucket.bench.dataset import Dataset
from imbucket.bench.memory_budget import Budget, Pass, parse_budget
from imbucket.bench.scale import Point, ScaleResults, parse_scales, reading, scaled
from imbucket.domain.errors import ConfigError


def test_a_budget_is_a_share_of_the_dataset_or_a_size() -> None:
    assert parse_budget("10%") == Budget(share=0.1)
    assert parse_budget("10%").bytes_for(1_000_000) == 100_000
    assert parse_budget("64MB") == Budget(size=64 * 2**20)
    assert parse_budget("512KiB").bytes_for(1) == 512 * 1024
    assert parse_budget("2g").size == 2 * 2**30


@pytest.mark.parametrize("text", ["", "0%", "150%", "ten%", "64 parsecs", "0MB", "-5MB"])
def test_a_budget_that_means_nothing_is_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_budget(text)


def test_scales_are_counts_with_k_and_m() -> None:
    assert parse_scales("1m, 10k,100k,10k") == (10_000, 100_000, 1_000_000)
    assert parse_scales("2500,1.5k") == (1_500, 2_500)


@pytest.mark.parametrize("text", ["", "10x", "500", "1m,,2m"])
def test_scales_that_are_not_counts_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_scales(text)


@pytest.mark.parametrize("messages", [10_000, 200_000])
def test_a_scaled_dataset_holds_about_the_messages_asked(messages: int) -> None:
    found = Dataset(scaled(messages)).messages
    assert 0.8 * messages <= found <= 1.25 * messages


def _point(messages: int, pages: float, index_bytes: int) -> Point:
    passes = {
        name: Pass(300, 1000, 2000, pages if name == "pull_range" else 10.0, 0.0, 0)
        for name in ("pull_latest", "pull_range", "pull_scattered", "delete_for_me")
    }
    return Point("postgresql", "sql-row", messages, 200.0, 80.0, index_bytes, passes)


def test_the_reading_says_what_grows_what_stays_flat_and_where_the_index_stops_fitting() -> None:
    results = ScaleResults(42, 64 * 2**20)
    results.points = [_point(10_000, 30.0, 2**20), _point(1_000_000, 90.0, 100 * 2**20)]
    lines = reading(results)
    assert any("pull_range" in line and "(grows)" in line for line in lines)
    assert any("pull_latest" in line and "(flat)" in line for line in lines)
    assert any("stops fitting a 64 MiB buffer at 1,000,000 messages" in line for line in lines)


def test_dropping_the_os_cache_advises_on_every_file(tmp_path: Path) -> None:
    (tmp_path / "base" / "1").mkdir(parents=True)
    for name in ("base/1/16384", "base/1/16385", "pg_control"):
        (tmp_path / name).write_bytes(b"x" * 8192)
    assert instances.drop_os_cache(tmp_path) == 3
