"""The dashboard's periodic jobs page: every namespace's jobs with schedule, next and last run
and last error, filtered to a namespace or queue (the queue's tab links there), paused and
resumed by a form that needs the page's CSRF token; signed-out visitors are sent to sign in."""

from __future__ import annotations

import html

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.periodic import PeriodicSpec
from app.core.service import QueueService
from tests.dashboard.conftest import Browser
from tests.helpers import make_queue
from tests.periodic.helpers import NS, make_job, set_next_run, tick

PAGE = "/dashboard/periodic"


async def test_the_page_lists_jobs_and_their_runs(
    signed_in: Browser, service: QueueService, engine: AsyncEngine
) -> None:
    await make_queue(service, NS, "q")
    await make_queue(service, "other", "r")
    await make_job(service, "nightly", schedule="0 3 * * *", timezone="Europe/Paris")
    await service.put_periodic("other", "elsewhere", PeriodicSpec("r", "@hourly"))
    await set_next_run(engine, "nightly", "now() - interval '1 second'")
    assert await tick(engine) == 1

    page = await signed_in.get(PAGE)
    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    assert 'data-job="ns/nightly"' in text
    assert 'data-job="other/elsewhere"' in text
    assert "0 3 * * *" in text
    assert "Europe/Paris" in text
    assert "/dashboard/queues/ns/q/messages/cron%3Anightly%3A" in page.text

    only = await signed_in.get(PAGE, params={"ns": NS, "queue": "q"})
    assert 'data-job="ns/nightly"' in only.text
    assert 'data-job="other/elsewhere"' not in only.text
    queue_page = await signed_in.get("/dashboard/queues/ns/q")
    assert "/dashboard/periodic?ns=ns&amp;queue=q" in queue_page.text


async def test_pause_and_resume(signed_in: Browser, service: QueueService) -> None:
    await make_queue(service, NS, "q")
    await make_job(service)
    action = f"{PAGE}/{NS}/job/paused"
    paused = await signed_in.submit(PAGE, action, {"paused": "true", "ns": NS})
    assert paused.status_code == 303
    assert paused.headers["location"] == f"{PAGE}?ns={NS}"
    assert (await service.get_periodic(NS, "job")).spec.paused
    after = await signed_in.get(paused.headers["location"])
    assert "Periodic job ns/job paused." in after.text
    assert ">Resume</button>" in after.text
    await signed_in.submit(PAGE, action, {"paused": "false"})
    assert not (await service.get_periodic(NS, "job")).spec.paused

    bad = await signed_in.submit(PAGE, action, {"paused": "maybe"})
    assert bad.status_code == 400
    assert "<code>paused</code>" in bad.text
    missing = await signed_in.submit(PAGE, f"{PAGE}/{NS}/nope/paused", {"paused": "true"})
    assert missing.status_code == 404


async def test_without_the_csrf_token_nothing_changes(
    signed_in: Browser, service: QueueService
) -> None:
    await make_queue(service, NS, "q")
    await make_job(service)
    response = await signed_in.post_form(f"{PAGE}/{NS}/job/paused", [("paused", "true")])
    assert response.status_code == 403
    assert not (await service.get_periodic(NS, "job")).spec.paused


async def test_signed_out_visitors_are_sent_to_sign_in(browser: Browser) -> None:
    response = await browser.get(PAGE)
    assert response.status_code in (302, 303)
    assert "/dashboard/login" in response.headers["location"]
