"""Python client for Sundial: :class:`Client` (blocking), :class:`AsyncClient` (asyncio) and
:class:`Worker` (a consumer loop). Depends only on httpx, msgspec and tenacity, never on the
server's code.

>>> from app.client import Client
>>> with Client("http://127.0.0.1:8080", token) as client:  # doctest: +SKIP
...     client.enqueue("shop/emails", {"to": "ada@example.com"}, id="welcome-42")
"""

from app.client.async_client import AsyncClient
from app.client.errors import (
    ApiError,
    CallFailed,
    CallTimeout,
    Conflict,
    Forbidden,
    InvalidState,
    LeaseMismatch,
    NotFound,
    PayloadTooLarge,
    QueuePaused,
    RateLimited,
    SundialError,
    Unauthorized,
    Unavailable,
    ValidationError,
)
from app.client.models import (
    Acknowledged,
    AckResult,
    Enqueued,
    Health,
    IssuedToken,
    Leased,
    LeasedFrom,
    Message,
    MessagePage,
    Namespace,
    NewMessage,
    Queue,
    Token,
)
from app.client.outcomes import Retry
from app.client.periodic import PeriodicJob
from app.client.retry import RetryPolicy
from app.client.sync_client import Client
from app.client.worker import Worker, WorkerStats

__all__ = [
    "AckResult",
    "Acknowledged",
    "ApiError",
    "AsyncClient",
    "CallFailed",
    "CallTimeout",
    "Client",
    "Conflict",
    "Enqueued",
    "Forbidden",
    "Health",
    "InvalidState",
    "IssuedToken",
    "LeaseMismatch",
    "Leased",
    "LeasedFrom",
    "Message",
    "MessagePage",
    "Namespace",
    "NewMessage",
    "NotFound",
    "PayloadTooLarge",
    "PeriodicJob",
    "Queue",
    "QueuePaused",
    "RateLimited",
    "Retry",
    "RetryPolicy",
    "SundialError",
    "Token",
    "Unauthorized",
    "Unavailable",
    "ValidationError",
    "Worker",
    "WorkerStats",
]
