"""Bulk-enqueue rows are judged by the core's rules (no Spark needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from app.core.models import QueueConfig
from app.core.validation import Limits
from app.pipeline.rows import (
    INPUT_COLUMNS,
    OUTPUT_SCHEMA,
    RowRejected,
    RowRules,
    check_batch,
    check_row,
)

SIMPLE = RowRules(QueueConfig(), Limits(max_payload_bytes=1024))
EXCLUSIVE = RowRules(QueueConfig(kind="exclusive", exclusive_key="project"), Limits())


def _row(**values):
    return {
        "_corrupt": None,
        "_source": "{}",
        "_id": "a-1",
        "_priority": None,
        "_payload": "{}",
        "_metadata": None,
        **values,
    }


def test_a_good_row_becomes_a_message():
    message = check_row(_row(_priority=" -12 ", _metadata='{"project": "web"}'), EXCLUSIVE)
    assert message == {
        "id": "a-1",
        "priority": -12,
        "payload": "{}",
        "metadata": '{"project":"web"}',
        "exclusive_value": "web",
    }


@pytest.mark.parametrize(
    ("values", "rules", "field"),
    [
        ({"_corrupt": "a,b,c"}, SIMPLE, "row"),
        ({"_id": None}, SIMPLE, "row.id"),
        ({"_id": "has space"}, SIMPLE, "row.id"),
        ({"_id": "x" * 201}, SIMPLE, "row.id"),
        ({"_priority": "1.5"}, SIMPLE, "row.priority"),
        ({"_priority": str(2**63)}, SIMPLE, "row.priority"),
        ({"_payload": '{"a": "' + "x" * 2000 + '"}'}, SIMPLE, "row.payload"),
        ({"_payload": '{"a": "\\u0000"}'}, SIMPLE, "row.payload"),
        ({"_metadata": '{"k": "' + "v" * 257 + '"}'}, SIMPLE, "row.metadata.k"),
        ({"_metadata": None}, EXCLUSIVE, "row.metadata.project"),
        ({"_metadata": '{"project": ""}'}, EXCLUSIVE, "row.metadata.project"),
    ],
)
def test_bad_rows_are_refused_naming_the_field(values, rules, field):
    with pytest.raises(RowRejected) as refused:
        check_row(_row(**values), rules)
    assert refused.value.field == field
    assert refused.value.reason.startswith(field)


def test_a_batch_keeps_one_output_row_per_input_row():
    batch = pa.RecordBatch.from_pylist(
        [_row(_id="ok-1"), _row(_id="bad id", _source='{"id": "bad id"}'), _row(_id="ok-2")],
        schema=pa.schema([(name, pa.string()) for name in INPUT_COLUMNS]),
    )
    out = check_batch(batch, SIMPLE)
    assert out.schema == OUTPUT_SCHEMA
    rows = out.to_pylist()
    assert [r["id"] for r in rows] == ["ok-1", None, "ok-2"]
    assert rows[1]["field"] == "row.id"
    assert rows[1]["source"] == '{"id": "bad id"}'
    assert rows[0]["reason"] is None
