"""The message browser (filters, cursor pagination) and a message's full detail."""

from __future__ import annotations

from litestar import get
from litestar.response import Template

from app.core.errors import ValidationError
from app.core.models import MessagePage
from app.core.states import DEAD_LETTER_STATES
from app.dashboard.common import page, service
from app.dashboard.format import STATE_ORDER
from app.dashboard.forms import PAGE_SIZES, BrowserQuery, FormError, browser_query
from app.web.runtime import AnyRequest, PathStr


@get("/queues/{ns:str}/{queue:str}/messages")
async def browse(request: AnyRequest, ns: PathStr, queue: PathStr) -> Template:
    """Messages of a queue, filtered by state, metadata and priority range, a page at a time.
    A bad filter is shown next to the form (400), naming the field."""
    found = await service(request).get_queue_or_404(ns, queue)
    params = {key: request.query_params.getall(key) for key in request.query_params}
    query = BrowserQuery()
    result: MessagePage | None = None
    error: FormError | ValidationError | None = None
    try:
        query = browser_query(params)
        result = await service(request).query_messages(ns, queue, query.to_filter())
    except (FormError, ValidationError) as problem:
        error = problem
        query = _keep_typed(params, query)
    return page(
        request,
        "messages.html",
        status_code=400 if error else 200,
        queue=found,
        query=query,
        result=result,
        error=error,
        states=STATE_ORDER,
        page_sizes=PAGE_SIZES,
        nav="overview",
    )


def _keep_typed(params: dict[str, list[str]], fallback: BrowserQuery) -> BrowserQuery:
    """The filters as typed, to show them again next to the error."""

    def one(key: str) -> str:
        return (params.get(key) or [""])[-1]

    return BrowserQuery(
        states=fallback.states,
        metadata_text=one("meta"),
        priority_min=one("priority_min"),
        priority_max=one("priority_max"),
        order=fallback.order,
        limit=fallback.limit,
    )


@get("/queues/{ns:str}/{queue:str}/messages/{message_id:str}")
async def message_detail(
    request: AnyRequest, ns: PathStr, queue: PathStr, message_id: PathStr
) -> Template:
    """Everything about one message: payload, metadata, attempts, last error, lease."""
    found = await service(request).get_queue_or_404(ns, queue)
    message = await service(request).get_message(ns, queue, message_id)
    return page(
        request,
        "message.html",
        queue=found,
        message=message,
        dead=message.state in DEAD_LETTER_STATES,
        nav="overview",
    )


HANDLERS = [browse, message_detail]
