"""Fan-out topics of a namespace: their subscriptions and the publish (namespace token of that
namespace, or the admin token)."""

from __future__ import annotations

from litestar import Response, Router, delete, get, post, put
from litestar.openapi.datastructures import ResponseSpec

from app.api.auth import require_namespace
from app.api.body import read
from app.api.openapi import SECURITY, with_body
from app.api.schemas.topics import (
    Publish,
    PublishOut,
    SubscriptionPut,
    TopicList,
    TopicOut,
    TopicPut,
)
from app.web.errors import error_specs
from app.web.runtime import AnyRequest, PathStr, service

_AUTH = (401, 403, 429)
_CREATED = {201: ResponseSpec(TopicOut, description="Created")}
_ONE = "/{topic:str}"
_SUBSCRIPTION = "/{topic:str}/subscriptions/{queue:str}"


@put(
    _ONE,
    operation_class=with_body(TopicPut),
    responses={**_CREATED, **error_specs(400, *_AUTH, 404, 413)},
)
async def put_topic(request: AnyRequest, ns: PathStr, topic: PathStr) -> Response[TopicOut]:
    """Create a topic (201) or bring it to exactly these subscriptions (200): a queue
    subscribed now but not listed is unsubscribed. Applies to every publish answered after
    this answer, in every server."""
    body = await read(request, TopicPut)
    found, created = await service(request).put_topic(ns, topic, body.to_specs())
    return Response(TopicOut.of(found), status_code=201 if created else 200)


@get("/", responses=error_specs(*_AUTH, 404))
async def list_topics(request: AnyRequest, ns: PathStr) -> TopicList:
    """The namespace's topics, each with its subscriptions."""
    return TopicList([TopicOut.of(t) for t in await service(request).list_topics(ns)])


@get(_ONE, responses=error_specs(*_AUTH, 404))
async def get_topic(request: AnyRequest, ns: PathStr, topic: PathStr) -> TopicOut:
    """A topic and its subscriptions."""
    return TopicOut.of(await service(request).get_topic(ns, topic))


@delete(_ONE, responses=error_specs(*_AUTH, 404))
async def delete_topic(request: AnyRequest, ns: PathStr, topic: PathStr) -> None:
    """Delete a topic and its subscriptions; the queues and their messages stay."""
    await service(request).delete_topic(ns, topic)


@put(
    _SUBSCRIPTION,
    operation_class=with_body(SubscriptionPut),
    responses={**_CREATED, **error_specs(400, *_AUTH, 404, 413)},
)
async def put_subscription(
    request: AnyRequest, ns: PathStr, topic: PathStr, queue: PathStr
) -> Response[TopicOut]:
    """Subscribe a queue to the topic (201; the topic is created if need be), or set its tag
    filter (200). An empty body subscribes without a filter."""
    body = await read(request, SubscriptionPut)
    found, created = await service(request).subscribe(ns, topic, queue, body.to_filter())
    return Response(TopicOut.of(found), status_code=201 if created else 200)


@delete(_SUBSCRIPTION, responses=error_specs(*_AUTH, 404))
async def delete_subscription(
    request: AnyRequest, ns: PathStr, topic: PathStr, queue: PathStr
) -> None:
    """Unsubscribe a queue; publishes answered after this answer no longer reach it."""
    await service(request).unsubscribe(ns, topic, queue)


@post(
    "/{topic:str}/messages",
    status_code=201,
    operation_class=with_body(Publish),
    responses=error_specs(400, *_AUTH, 404, 409, 413),
)
async def publish(request: AnyRequest, ns: PathStr, topic: PathStr) -> PublishOut:
    """Publish 1-1000 messages: each is enqueued into every subscribed queue whose filter
    accepts it, all in one transaction. When one of those queues would refuse (paused for
    enqueue: 409 `queue_paused`; an exclusive queue's key missing: 400), nothing is stored.
    A message has the same id in every queue, so publishing it again creates nothing twice."""
    body = await read(request, Publish)
    return PublishOut.of(await service(request).publish(ns, topic, body.to_models()))


router = Router(
    "/v1/namespaces/{ns:str}/topics",
    route_handlers=[
        put_topic,
        list_topics,
        get_topic,
        delete_topic,
        put_subscription,
        delete_subscription,
        publish,
    ],
    before_request=require_namespace,
    security=SECURITY,
    tags=["topics"],
)
