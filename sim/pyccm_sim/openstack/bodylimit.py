"""oslo.middleware's request body limit, as Octavia and Nova apply it in front of their APIs.

Octavia wraps its whole WSGI app in `oslo_middleware.sizelimit.RequestBodySizeLimiter`
(`octavia/api/app.py`) and Nova has `sizelimit` in its paste pipeline; both read
`[oslo_middleware] max_request_body_size` (114,688 bytes unless the operator raised it).
Neutron's and Keystone's pipelines have no such filter, so their bodies are not limited.

The middleware sits in front of authentication and of the service's own error handling,
so the 413 is webob's `HTTPRequestEntityTooLarge` rendered by webob 1.8's content
negotiation (text/plain without an Accept header, HTML for `*/*`, JSON only when asked
for), not the service's fault shape. Its explanation keeps a literal `%s`: oslo formats
the limit into its log line only.
"""

from __future__ import annotations

from aiohttp import web

LIMITED_SERVICES = frozenset({"load-balancer", "compute"})

STATUS = "413 Request Entity Too Large"
TITLE = "Request Entity Too Large"
EXPLANATION = "Request is too large. Larger than max_request_body_size (%s)."
OFFERS = ("text/html", "application/json")


def too_large(accept: str) -> web.Response:
    """The 413 webob sends for `HTTPRequestEntityTooLarge`, in the type `accept` prefers."""
    match _negotiate(accept):
        case "text/html":
            body = (
                f"<html>\n <head>\n  <title>{STATUS}</title>\n </head>\n <body>\n"
                f"  <h1>{STATUS}</h1>\n  {EXPLANATION}<br /><br />\n\n\n\n </body>\n</html>"
            )
            return web.Response(status=413, text=body, content_type="text/html")
        case "application/json":
            message = f"{EXPLANATION}<br /><br />\\n\\n\\n"
            body = f'{{"message": "{message}", "code": "{STATUS}", "title": "{TITLE}"}}'
            return web.Response(status=413, text=body, content_type="application/json")
    body = f"{STATUS}\n\n{EXPLANATION}\n\n   "
    return web.Response(status=413, text=body, content_type="text/plain")


def _negotiate(accept: str) -> str | None:
    """webob's `acceptable_offers(["text/html", "application/json"])[0]`, or None.

    No (or an empty) Accept header offers nothing, so webob falls back to text/plain;
    among acceptable offers the highest q wins, ties going to the earlier offer.
    """
    ranges = [_media_range(part) for part in accept.split(",") if part.strip()]
    best: tuple[float, str] | None = None
    for offer in OFFERS:
        quality = _quality(offer, ranges)
        if quality > 0 and (best is None or quality > best[0]):
            best = (quality, offer)
    return best[1] if best else None


def _media_range(part: str) -> tuple[str, float]:
    media, *params = (piece.strip() for piece in part.split(";"))
    quality = 1.0
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                quality = float(value)
            except ValueError:
                quality = 0.0
    return media.lower(), quality


def _quality(offer: str, ranges: list[tuple[str, float]]) -> float:
    """The q of the most specific range matching `offer` (exact, then `type/*`, then `*/*`)."""
    kind = offer.partition("/")[0]
    for pattern in (offer, f"{kind}/*", "*/*"):
        matching = [quality for media, quality in ranges if media == pattern]
        if matching:
            return max(matching)
    return 0.0
