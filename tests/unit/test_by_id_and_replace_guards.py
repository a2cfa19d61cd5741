"""The guards of lease by id and of the replacing enqueue come from the state machine
(app/core/states.py): their SQL names exactly the states the transition table allows."""

from __future__ import annotations

from app.core.states import CLAIM, TRANSITIONS, Event, State
from app.store.sql import enqueue, lease_by_id
from app.store.sql.guards import from_states


def test_lease_by_id_leases_what_the_claim_leases() -> None:
    assert TRANSITIONS[Event.LEASE_BY_ID] == TRANSITIONS[Event.DEQUEUE]
    for statement in (
        lease_by_id.MESSAGE_LEASE_IF_READY,
        lease_by_id.MESSAGE_LEASE_IF_READY_EXCLUSIVE,
    ):
        sql = statement.text
        assert f"c.state = '{CLAIM.ready}'" in sql
        assert f"c.state = '{CLAIM.due}' AND c.visible_at <= now()" in sql
        assert f"SET state = '{CLAIM.leased}'" in sql
    assert "NOT EXISTS" in lease_by_id.MESSAGE_LEASE_IF_READY_EXCLUSIVE.text
    assert "NOT EXISTS" not in lease_by_id.MESSAGE_LEASE_IF_READY.text


def test_a_replace_changes_only_waiting_messages() -> None:
    assert set(TRANSITIONS[Event.REPLACE]) == {State.INVISIBLE, State.PENDING}
    guard = f"messages.state = ANY(CAST('{from_states(Event.REPLACE)}' AS message_state[]))"
    for statement in (enqueue.MESSAGES_ENQUEUE_OR_REPLACE, enqueue.MESSAGE_ENQUEUE_ONE_OR_REPLACE):
        assert guard in statement.text
        assert "DO UPDATE" in statement.text
    for statement in (enqueue.MESSAGES_ENQUEUE_IF_NEW, enqueue.MESSAGE_ENQUEUE_ONE_IF_NEW):
        assert "DO NOTHING" in statement.text
        assert "DO UPDATE" not in statement.text
