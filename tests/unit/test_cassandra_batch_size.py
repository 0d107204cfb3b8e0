"""Reading Cassandra's size settings (``system_views.settings`` values) for batch sizing."""

from __future__ import annotations

import pytest

from trustgraph_base.store.cassandra.connection import parse_size


@pytest.mark.parametrize("value, expected", [
    ("5KiB", 5 * 1024), ("50KiB", 50 * 1024), ("1MiB", 1024 * 1024), ("512B", 512), ("5", 5 * 1024),
    (" 40KiB ", 40 * 1024), ("40kib", 40 * 1024),
])
def test_sizes_in_every_unit_cassandra_writes(value, expected):
    assert parse_size(value) == expected


@pytest.mark.parametrize("value", ["", "KiB", "5GB", "5.5KiB", "-5KiB", "null", "5 KiB"])
def test_unreadable_sizes_are_none_so_the_defaults_apply(value):
    assert parse_size(value) is None
