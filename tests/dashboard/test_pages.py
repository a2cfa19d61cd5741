"""The dashboard's pages over plain HTTP, signed in: what they show, the message browser's
filters and pages, the pause switches, and dead letters requeued or deleted only after the
confirmation step."""

from __future__ import annotations

import html
import re

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.models import NewMessage
from app.core.service import QueueService
from tests.dashboard.conftest import Browser
from tests.helpers import make_queue, states_of


def ids_listed(html: str) -> list[str]:
    """Message ids linked from a listing, in page order."""
    return re.findall(r'/messages/([A-Za-z0-9._:-]+)">', html)


async def make_dead_letters(service: QueueService, *ids: str) -> None:
    """Queue ns/q (max_attempts=1) holding ``ids`` as errored messages."""
    await make_queue(service, "ns", "q", max_attempts=1)
    await service.enqueue("ns", "q", [NewMessage(id=i) for i in ids])
    for leased in await service.dequeue("ns", "q", count=len(ids)):
        await service.fail("ns", "q", leased.id, leased.lease_id, error=f"{leased.id} broke")


async def test_overview_shows_namespaces_queues_and_counts(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "shop", "emails")
    await make_queue(service, "shop", "builds", kind="exclusive", exclusive_key="project")
    await service.create_namespace("empty")
    await service.enqueue("shop", "emails", [NewMessage(id=f"m{i}") for i in range(3)])

    page = await signed_in.get("/dashboard/")

    assert page.status_code == 200
    html = page.text
    assert 'href="/dashboard/queues/shop/emails"' in html
    assert 'href="/dashboard/queues/shop/builds"' in html
    assert "No queues in this namespace." in html  # "empty"
    assert re.search(r'data-q="shop/emails" data-count="pending">3<', html)
    assert 'data-chart="throughput"' in html

    # One database: no Pools card and no pool beside the namespaces, as before pools.
    assert 'id="pools"' not in html
    assert "data-ns-pool" not in html

    data = (await signed_in.get("/dashboard/api/overview")).json()
    emails = next(q for q in data["queues"] if q["key"] == "shop/emails")
    assert emails["counts"]["pending"] == 3
    assert emails["pool"] == "default"
    assert data["throughput"]["totals"]["enqueued"] == 3
    assert len(data["throughput"]["enqueued"]) == 60
    assert data["pools"] == [
        {
            "name": "default",
            "available": True,
            "namespaces": ["empty", "shop"],
            "unavailable_namespaces": [],
            "waiting": 3,
            "running": 0,
        }
    ]


async def test_queue_page_shows_configuration_charts_and_exclusive_values(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "builds", kind="exclusive", exclusive_key="project")
    await service.enqueue(
        "ns",
        "builds",
        [NewMessage(id=f"web-{i}", metadata={"project": "web"}) for i in range(3)],
    )
    await service.dequeue("ns", "builds", count=5)

    page = await signed_in.get("/dashboard/queues/ns/builds")

    assert page.status_code == 200
    assert 'data-chart="wait"' in page.text
    assert "1 running · 2 blocked among the next 2 pending" in page.text
    assert "<code>web</code>" in page.text
    data = (await signed_in.get("/dashboard/api/queues/ns/builds")).json()
    assert data["exclusive"]["running"][0]["value"] == "web"
    assert data["exclusive"]["running"][0]["blocked"] == 2
    assert data["queue"]["counts"]["running"] == 1
    assert len(data["wait_times"]["p50"]) == 60


async def test_unknown_queue_is_a_404_page(signed_in: Browser) -> None:
    for path in ["/dashboard/queues/ns/nope", "/dashboard/queues/ns/nope/messages"]:
        page = await signed_in.get(path)
        assert page.status_code == 404
        assert "does not exist" in page.text
    assert (await signed_in.get("/dashboard/api/queues/ns/nope")).json()["error"]["code"] == (
        "not_found"
    )


async def test_switches_pause_and_resume_a_queue(signed_in: Browser, service: QueueService) -> None:
    await make_queue(service, "ns", "q")
    page_path = "/dashboard/queues/ns/q"

    paused = await signed_in.submit(
        page_path, f"{page_path}/switches", {"switch": "dequeue_paused", "paused": "true"}
    )

    assert paused.status_code == 303
    assert paused.headers["location"] == page_path
    assert (await service.get_queue_or_404("ns", "q")).config.dequeue_paused
    after = await signed_in.get(page_path)
    assert "Dequeue paused on ns/q." in after.text
    assert 'id="toggle-dequeue_paused">Resume dequeue' in after.text

    await signed_in.submit(
        page_path, f"{page_path}/switches", {"switch": "dequeue_paused", "paused": "false"}
    )
    assert not (await service.get_queue_or_404("ns", "q")).config.dequeue_paused


async def test_a_bad_switch_is_a_400_naming_the_field(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    response = await signed_in.submit(
        "/dashboard/queues/ns/q", "/dashboard/queues/ns/q/switches", {"switch": "kind"}
    )
    assert response.status_code == 400
    assert "<code>switch</code>" in response.text


async def test_message_browser_filters_by_state_metadata_and_priority(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    await service.enqueue(
        "ns",
        "q",
        [
            NewMessage(id=f"m{i}", priority=i, metadata={"lang": "en" if i % 2 else "fr"})
            for i in range(10)
        ],
    )
    await service.dequeue("ns", "q", count=2)  # m0 and m1 run
    base = "/dashboard/queues/ns/q/messages"

    running = await signed_in.get(f"{base}?state=running")
    english = await signed_in.get(f"{base}?meta=lang%3Den&state=pending")
    band = await signed_in.get(f"{base}?priority_min=3&priority_max=5&order=priority")

    assert sorted(ids_listed(running.text)) == ["m0", "m1"]
    assert sorted(ids_listed(english.text)) == ["m3", "m5", "m7", "m9"]
    assert ids_listed(band.text) == ["m3", "m4", "m5"]


async def test_message_browser_pages_with_its_cursor(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    await service.enqueue("ns", "q", [NewMessage(id=f"m{i:02d}") for i in range(30)])

    first = await signed_in.get("/dashboard/queues/ns/q/messages?limit=25")
    link = re.search(r'id="next-page" href="([^"]+)"', first.text)
    assert link
    second = await signed_in.get(link.group(1).replace("&amp;", "&"))

    listed = ids_listed(first.text) + ids_listed(second.text)
    assert len(ids_listed(first.text)) == 25
    assert sorted(listed) == [f"m{i:02d}" for i in range(30)]
    assert 'id="next-page"' not in second.text


BAD_FILTERS = [
    ("priority_min=abc", "priority_min"),
    ("priority_min=5&priority_max=1", "priority_max"),
    ("meta=novalue", "meta"),
    ("state=sleeping", "state"),
    ("limit=7", "limit"),
    ("order=random", "order"),
]


async def test_a_bad_filter_is_shown_naming_its_field(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "q")
    for query, field in BAD_FILTERS:
        page = await signed_in.get(f"/dashboard/queues/ns/q/messages?{query}")
        assert page.status_code == 400, query
        assert re.search(rf'id="filter-error"><strong>{field}</strong>', page.text), query


async def test_message_detail_shows_everything_about_a_message(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, "ns", "q", max_attempts=2)
    await service.enqueue(
        "ns",
        "q",
        [NewMessage(id="job-1", payload=b'{"to":"ada","n":[1,2]}', metadata={"lang": "en"})],
    )
    (leased,) = await service.dequeue("ns", "q")
    await service.fail("ns", "q", "job-1", leased.lease_id, error="smtp <timeout>")

    page = await signed_in.get("/dashboard/queues/ns/q/messages/job-1")

    assert page.status_code == 200
    text = html.unescape(page.text)
    assert '\n  "to": "ada"' in text  # pretty-printed
    assert '\n  "n": [\n    1,' in text
    assert "smtp &lt;timeout&gt;" in page.text  # escaped
    assert "1 of 2" in page.text
    assert ">lang<" in page.text
    assert (await signed_in.get("/dashboard/queues/ns/q/messages/nope")).status_code == 404


async def test_dead_letters_requeue_only_after_confirmation(
    signed_in: Browser, service: QueueService, engine: AsyncEngine
) -> None:
    await make_dead_letters(service, "a", "b", "c")
    queue = await service.get_queue_or_404("ns", "q")
    listing = "/dashboard/queues/ns/q/dead-letters"
    page = await signed_in.get(listing)
    assert sorted(ids_listed(page.text)) == ["a", "b", "c"]
    assert "a broke" in page.text

    confirm = await signed_in.submit(
        listing,
        f"{listing}/confirm",
        [("action", "requeue"), ("ids", "a"), ("ids", "b")],
    )
    assert confirm.status_code == 200
    assert "Requeue 2 messages of ns/q?" in confirm.text
    assert await states_of(engine, queue) == {"a": "errored", "b": "errored", "c": "errored"}

    applied = await signed_in.submit(
        listing, f"{listing}/apply", [("action", "requeue"), ("ids", "a"), ("ids", "b")]
    )
    assert applied.status_code == 303
    assert await states_of(engine, queue) == {"a": "pending", "b": "pending", "c": "errored"}
    assert "Requeued 2 messages of ns/q." in (await signed_in.get(listing)).text


async def test_a_rows_own_button_acts_on_that_message_only(
    signed_in: Browser, service: QueueService, engine: AsyncEngine
) -> None:
    await make_dead_letters(service, "a", "b")
    queue = await service.get_queue_or_404("ns", "q")
    listing = "/dashboard/queues/ns/q/dead-letters"

    confirm = await signed_in.submit(
        listing, f"{listing}/confirm", [("ids", "a"), ("single", "delete:b")]
    )
    assert "Delete 1 message of ns/q?" in confirm.text
    await signed_in.submit(listing, f"{listing}/apply", [("action", "delete"), ("ids", "b")])

    assert await states_of(engine, queue) == {"a": "errored"}


async def test_deleting_selected_dead_letters_spares_messages_requeued_meanwhile(
    signed_in: Browser, service: QueueService, engine: AsyncEngine
) -> None:
    await make_dead_letters(service, "a", "b")
    queue = await service.get_queue_or_404("ns", "q")
    listing = "/dashboard/queues/ns/q/dead-letters"
    await service.requeue("ns", "q", "b")  # someone else, between the page and the click

    response = await signed_in.submit(
        listing, f"{listing}/apply", [("action", "delete"), ("ids", "a"), ("ids", "b")]
    )

    assert response.status_code == 303
    assert await states_of(engine, queue) == {"b": "pending"}
    text = (await signed_in.get(listing)).text
    assert "Deleted 1 message of ns/q." in text
    assert "1 of the chosen messages were no longer dead letters" in text


async def test_requeue_all_and_delete_all(
    signed_in: Browser, service: QueueService, engine: AsyncEngine
) -> None:
    await make_dead_letters(service, "a", "b", "c")
    await service.enqueue("ns", "q", [NewMessage(id="live")])
    await service.cancel("ns", "q", "live")
    queue = await service.get_queue_or_404("ns", "q")
    listing = "/dashboard/queues/ns/q/dead-letters"

    confirm = await signed_in.submit(
        listing,
        f"{listing}/confirm",
        [("action", "requeue"), ("every", "1"), ("states", "errored")],
    )
    assert "Requeue all 3 errored messages of ns/q?" in confirm.text
    await signed_in.submit(
        listing, f"{listing}/apply", [("action", "requeue"), ("every", "1"), ("states", "errored")]
    )
    assert await states_of(engine, queue) == {
        "a": "pending",
        "b": "pending",
        "c": "pending",
        "live": "canceled",
    }

    await signed_in.submit(
        listing,
        f"{listing}/apply",
        [("action", "delete"), ("every", "1"), ("states", "errored"), ("states", "canceled")],
    )
    assert set(await states_of(engine, queue)) == {"a", "b", "c"}


async def test_a_dead_letter_form_without_a_choice_is_a_400(
    signed_in: Browser, service: QueueService
) -> None:
    await make_dead_letters(service, "a")
    listing = "/dashboard/queues/ns/q/dead-letters"
    response = await signed_in.submit(listing, f"{listing}/confirm", [("action", "requeue")])
    assert response.status_code == 400
    assert "choose at least one message" in response.text


async def test_dead_letter_index_lists_queues_holding_dead_letters(
    signed_in: Browser, service: QueueService
) -> None:
    await make_dead_letters(service, "a")
    await make_queue(service, "ns", "clean")
    page = await signed_in.get("/dashboard/dead-letters")
    assert 'href="/dashboard/queues/ns/q/dead-letters"' in page.text
    assert "/dashboard/queues/ns/clean/dead-letters" not in page.text
