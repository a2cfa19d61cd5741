"""Namespaces and their tokens through the service, and authentication."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core.errors import (
    ConflictError,
    NotFoundError,
    ValidationError,
)
from app.core.models import (
    Principal,
)
from app.core.service import QueueService
from app.core.validation import Limits
from tests.helpers import (
    count_messages,
    execute,
    make_queue,
    scalar,
)
from tests.service.helpers import ADMIN_TOKEN, NS, Q, new


async def test_namespaces(service):
    created = await service.create_namespace("alpha", "first one")
    assert (created.name, created.description) == ("alpha", "first one")
    await service.create_namespace("beta")
    with pytest.raises(ConflictError):
        await service.create_namespace("alpha", "again")
    assert [(n.name, n.description) for n in await service.list_namespaces()] == [
        ("alpha", "first one"),
        ("beta", ""),
    ]
    with pytest.raises(ValidationError) as info:
        await service.create_namespace("no spaces")
    assert info.value.field == "name"
    with pytest.raises(ValidationError) as info:
        await service.create_namespace("ok", "nul\x00")
    assert info.value.field == "description"
    with pytest.raises(NotFoundError):
        await service.delete_namespace("gamma")


async def test_delete_namespace_cascades(service, engine):
    queue = await make_queue(service, "doomed", Q)
    await service.enqueue("doomed", Q, [new("a"), new("b")])
    issued = await service.issue_token("doomed")
    kept = await make_queue(service, "kept", Q)
    await service.enqueue("kept", Q, [new("a")])
    await service.delete_namespace("doomed")
    assert [n.name for n in await service.list_namespaces()] == ["kept"]
    assert await count_messages(engine, queue.id) == 0
    assert await scalar(engine, "SELECT count(*) FROM queues WHERE namespace = 'doomed'") == 0
    assert await scalar(engine, "SELECT count(*) FROM tokens WHERE namespace = 'doomed'") == 0
    assert await service.authenticate(issued.secret) is None
    with pytest.raises(NotFoundError):
        await service.get_queue_or_404("doomed", Q)
    with pytest.raises(NotFoundError):
        await service.list_tokens("doomed")
    assert await count_messages(engine, kept.id) == 1


async def test_tokens_issue_list_revoke(service):
    await service.create_namespace(NS)
    await service.create_namespace("other")
    issued = await service.issue_token(NS, "ci")
    second = await service.issue_token(NS, "deploy")
    assert issued.secret.startswith("sdl_")
    assert issued.secret != second.secret
    assert (issued.token.namespace, issued.token.label, issued.token.expires_at) == (
        NS,
        "ci",
        None,
    )
    listed = await service.list_tokens(NS)
    assert [t.id for t in listed] == [issued.token.id, second.token.id]
    assert listed[0] == issued.token
    assert not hasattr(listed[0], "secret")
    assert await service.list_tokens("other") == []
    principal = await service.authenticate(issued.secret)
    assert principal == Principal(is_admin=False, namespace=NS, token_id=issued.token.id)
    # Revoking through another namespace finds nothing and changes nothing.
    with pytest.raises(NotFoundError):
        await service.revoke_token("other", issued.token.id)
    assert await service.authenticate(issued.secret) is not None
    await service.revoke_token(NS, issued.token.id)
    assert await service.authenticate(issued.secret) is None
    assert await service.authenticate(second.secret) is not None
    assert [t.id for t in await service.list_tokens(NS)] == [second.token.id]
    with pytest.raises(NotFoundError):
        await service.revoke_token(NS, issued.token.id)
    with pytest.raises(NotFoundError):
        await service.revoke_token(NS, "not-a-uuid")


async def test_token_refusals(service):
    with pytest.raises(NotFoundError):
        await service.issue_token("nowhere")
    with pytest.raises(NotFoundError):
        await service.list_tokens("nowhere")
    await service.create_namespace(NS)
    with pytest.raises(ValidationError) as info:
        await service.issue_token(NS, "x" * 201)
    assert info.value.field == "label"
    with pytest.raises(ValidationError) as info:
        await service.issue_token(NS, expires_at=datetime(2030, 1, 1))  # noqa: DTZ001
    assert info.value.field == "expires_at"
    assert await service.list_tokens(NS) == []


async def test_authenticate(service, engine):
    await service.create_namespace(NS)
    admin = await service.authenticate(ADMIN_TOKEN)
    assert admin == Principal(is_admin=True)
    assert admin.may_access(NS)
    assert admin.may_access("anything")
    expired = await service.issue_token(NS, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    assert await service.authenticate(expired.secret) is None
    valid = await service.issue_token(NS, expires_at=datetime.now(UTC) + timedelta(hours=1))
    principal = await service.authenticate(valid.secret)
    assert principal is not None
    assert principal.may_access(NS)
    assert not principal.may_access("other")
    # Expiry is judged by the database clock at each call.
    await execute(engine, "UPDATE tokens SET expires_at = now() - interval '1 second'")
    assert await service.authenticate(valid.secret) is None
    for garbage in ["", "x", "sdl_", "sdl_" + "A" * 43, ADMIN_TOKEN + "x", ADMIN_TOKEN[:-1]]:
        assert await service.authenticate(garbage) is None, garbage
    assert await service.authenticate(valid.secret + "x") is None
    assert await service.authenticate("sdl_" + "a" * 300) is None


async def test_authenticate_without_admin_token():
    # No database needed: these secrets never reach the store.
    for admin_token in (None, ""):
        service = QueueService(_NoStore(), limits=Limits(), admin_token=admin_token)
        assert await service.authenticate("") is None
        assert await service.authenticate(ADMIN_TOKEN) is None


class _NoStore:
    def __getattr__(self, name):
        raise AssertionError(f"the store was used: {name}")
