"""Shared server plumbing: what the HTTP edges (the API, the dashboard, the metrics endpoint)
share and none of them owns — the runtime a request reaches (:mod:`.runtime`), where long polls
wait (:mod:`.waiters`), problem responses (:mod:`.errors`), bearer credentials
(:mod:`.credentials`), the failed-authentication throttle (:mod:`.throttle`) and the per-token
rate limit (:mod:`.ratelimit`)."""
