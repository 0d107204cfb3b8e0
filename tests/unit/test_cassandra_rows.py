"""The Cassandra row factory: named rows like the driver's default, without a new class per result set."""

from __future__ import annotations

import pytest

from trustgraph_base.store.cassandra.connection import lwt_applied, named_rows


def test_rows_are_named_tuples_and_share_one_class_per_column_list():
    first = named_rows(["id", "label", "score"], [("a", "A", 0.5), ("b", "B", 0.25)])
    second = named_rows(["id", "label", "score"], [("c", "C", 1.0)])
    assert first[0].id == "a" and first[1].score == 0.25 and tuple(second[0]) == ("c", "C", 1.0)
    assert type(first[0]) is type(second[0])  # no class built per result set
    other = named_rows(["count"], [(3,)])
    assert other[0][0] == 3 and type(other[0]) is not type(first[0])


def test_column_names_are_cleaned_like_the_driver_does():
    rows = named_rows(["[applied]", "system.count(*)"], [(True, 7)])
    assert rows[0][0] is True and rows[0][1] == 7


class _Result:
    def __init__(self, rows):
        self.rows = rows

    def one(self):
        return self.rows[0] if self.rows else None


def test_lwt_applied_reads_the_applied_column():
    assert lwt_applied(_Result(named_rows(["[applied]"], [(True,)]))) is True
    assert lwt_applied(_Result(named_rows(["[applied]", "id"], [(False, "x")]))) is False
    with pytest.raises(RuntimeError):
        lwt_applied(_Result([]))
