"""The console's web core: what handlers share, page rendering, login, CSRF, error pages.

RocketMQ counterpart: rocketmq-dashboard (a Spring Boot app of its own with a React front
end). Here the pages are rendered on the server by Jinja2 and served by aiohttp on the
console's asyncio loop; htmx (vendored) swaps fragments in place, uPlot (vendored) draws the
charts, and server-sent events (``/events``) carry each new sample to open pages. Everything
the console knows it learns through ``client.admin.Admin``, so it works against Apache
RocketMQ 4.x brokers as well as ours.

Reading is open to whoever reaches the port (127.0.0.1 unless ``--host`` says otherwise);
anything that changes state needs a login and the session's CSRF token, and a cross-origin
request that changes state is refused whoever sends it. A failure a user can cause (an
unknown topic, a malformed message id, a time range the wrong way round, a broker's refusal)
comes back as a message on the page; anything else is logged and shown as a one-line error.
"""

from __future__ import annotations

import hmac
import logging
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from client.admin import Admin
from client.dashboard.auth import Accounts, Session
from client.dashboard.sampler import CLUSTER_FAILURES, Sampler
from client.errors import InvalidArgumentError
from client.message import check_group, check_topic

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
COOKIE = "aerolite_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
MAX_BODY_BYTES = 4 << 20  # a test message's body, with room for the form around it
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PUBLIC_POSTS = frozenset({"/login"})
CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BadInput(InvalidArgumentError):
    """Input the console refuses before asking a broker; the text is shown on the page."""


# ----------------------------------------------------------------------- reading input

MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, as far as a date goes


def form_text(values: Any, name: str) -> str:
    """A form's or query's field, stripped ("" when absent, or a file upload)."""
    value = values.get(name, "")
    return value.strip() if isinstance(value, str) else ""


def shown(text: str, limit: int = 40) -> str:
    """A user's value quoted in a message, cut short: the page need not repeat a megabyte."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def whole_number(text: str, top: int) -> int | None:
    """``text`` as a whole number from 0 to ``top``; None when it is not one (the length is
    checked first: Python refuses to convert a string of thousands of digits)."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(top)):
        return None
    value = int(text)
    return value if value <= top else None


def local_time_ms(text: str, what: str) -> int:
    """A ``datetime-local`` value as epoch ms: the browser sends the user's local time
    without a zone, so it is read as this machine's local time."""
    try:
        value = round(datetime.fromisoformat(text).timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        raise BadInput(
            f"{what} {shown(text)} is not a time: it is not a date and time "
            "(YYYY-MM-DDTHH:MM[:SS[.mmm]]) or epoch milliseconds"
        ) from None
    if value < 0:
        # a negative time would reach the brokers as a -1-like "skip to the end"
        raise BadInput(f"{text} is before 1970-01-01: nothing is stored before then")
    return value


def epoch_ms(text: str, what: str) -> int:
    """Epoch milliseconds, or a ``datetime-local`` value (``local_time_ms``)."""
    if text.isascii() and text.isdigit():
        value = whole_number(text, MAX_EPOCH_MS)
        if value is None:
            raise BadInput(
                f"{what}: epoch milliseconds must be a whole number from 0 to {MAX_EPOCH_MS}"
            )
        return value
    return local_time_ms(text, what)


def checked_topic(name: str, *, to_send: bool = False) -> str:
    """``name`` if it is a legal topic name (``Validators.checkTopic``), else BadInput."""
    return _checked("topic", name, lambda: check_topic(name, to_send=to_send))


def checked_group(name: str, *, consumer: bool = False) -> str:
    """``name`` if it is a legal group name, else BadInput."""
    return _checked("group", name, lambda: check_group(name, consumer=consumer))


def _checked(kind: str, name: str, check: Callable[[], object]) -> str:
    """``name`` once ``check`` accepts it; its refusal as BadInput naming the ``kind``."""
    try:
        check()
    except InvalidArgumentError as exc:
        raise BadInput(f"{f'{kind} {shown(name)}' if name else f'name a {kind}'}: {exc}") from None
    return name


@dataclass
class Console:
    """What every handler shares: the admin client, the accounts, the live sampler."""

    admin: Admin
    accounts: Accounts
    sampler: Sampler
    namesrv: str
    env: jinja2.Environment = field(init=False)

    def __post_init__(self) -> None:
        self.env = template_env()


CONSOLE: web.AppKey[Console] = web.AppKey("console", Console)
SESSION_KEY: web.RequestKey[Session | None] = web.RequestKey("session", Session)


def metric_url(family: str, **labels: object) -> str:
    """The console's page for one Prometheus series: every number a page shows links to the
    metric that carries it, with the labels that pick its line."""
    query = {"family": family, **{k: str(v) for k, v in labels.items()}}
    return "/metric?" + urllib.parse.urlencode(query)


def template_env() -> jinja2.Environment:
    """The pages' templates: autoescaped (message bodies and names are untrusted), every
    variable a template names required, with the console's filters and ``metric()``."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    env.globals["metric"] = metric_url
    return env


def console_of(request: web.Request) -> Console:
    return request.app[CONSOLE]


def session_of(request: web.Request) -> Session | None:
    return request.get(SESSION_KEY)


def render(
    request: web.Request,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    status: int = 200,
) -> web.Response:
    """A page (or, for an htmx request naming a ``fragment``, only that fragment's template)
    with the signed-in user and CSRF token every form needs."""
    console = console_of(request)
    session = session_of(request)
    values = {
        "request": request,
        "user": session.user if session else None,
        "csrf": session.csrf if session else "",
        "namesrv": console.namesrv,
        "path": request.path,
        "users_configured": bool(console.accounts.users),
        "notices": _take_notices(session),
        **(context or {}),
    }
    text = console.env.get_template(template).render(values)
    response = web.Response(text=text, content_type="text/html", status=status)
    response.headers["Cache-Control"] = "no-store"
    return response


def _take_notices(session: Session | None) -> list[tuple[str, str]]:
    if session is None or not session.notices:
        return []
    taken, session.notices = session.notices, []
    return taken


def see_other(location: str) -> web.Response:
    """A 303 to ``location``: returned, not raised (an aiohttp HTTPException is no error of
    ours, and the SDK raises only its own tree)."""
    return web.Response(status=303, headers={"Location": location})


def done(request: web.Request, text: str, location: str, *, kind: str = "ok") -> web.Response:
    """After a change: the outcome is shown once by the next page, which ``location`` names
    (Post/Redirect/Get, so a reload does not repeat the change). ``return done(...)``."""
    session = session_of(request)
    if session is not None:
        session.notices.append((kind, text))
    return see_other(location)


def wants_fragment(request: web.Request) -> bool:
    return request.headers.get("HX-Request") == "true"


def message_page(request: web.Request, title: str, text: str, *, status: int) -> web.Response:
    if wants_fragment(request):
        return render(request, "_message.html", {"kind": "error", "text": text}, status=status)
    return render(request, "message.html", {"title": title, "text": text}, status=status)


def error_text(exc: BaseException) -> str:
    """What the page says about a failure: the refusal as the SDK words it (request, address,
    code and remark), or a decoding problem's own text."""
    return str(exc) or type(exc).__name__


@web.middleware
async def headers_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "DENY")
    return response


def _same_origin(request: web.Request) -> bool:
    """A browser names where an unsafe request comes from; one from another site is refused
    even with a valid session (SameSite=Strict already keeps its cookie away)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("Origin")
    return origin is None or origin == f"{request.scheme}://{request.host}"


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    console = console_of(request)
    session = console.accounts.session(request.cookies.get(COOKIE))
    request[SESSION_KEY] = session
    if request.method not in UNSAFE:
        return await handler(request)
    if not _same_origin(request):
        return message_page(
            request, "Refused", "A request from another site cannot change anything.", status=403
        )
    if request.path in PUBLIC_POSTS:
        return await handler(request)
    if session is None:
        response = message_page(
            request,
            "Log in to do this",
            "Changing topics, groups, offsets or messages needs a login.",
            status=401,
        )
        if wants_fragment(request):
            response.headers["HX-Redirect"] = f"/login?next={request.path}"
        return response
    token = request.headers.get(CSRF_HEADER)
    if token is None:
        form = await request.post()
        value = form.get(CSRF_FIELD)
        token = value if isinstance(value, str) else None
    if token is None or not hmac.compare_digest(token, session.csrf):
        return message_page(
            request,
            "Refused",
            "The form's security token is missing or stale: reload the page and try again.",
            status=403,
        )
    return await handler(request)


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status == 404 and request.method == "GET":
            return message_page(request, "Not found", f"No page at {request.path}.", status=404)
        raise
    except BadInput as exc:
        return message_page(request, "Cannot do that", str(exc), status=422)
    except CLUSTER_FAILURES as exc:
        return message_page(request, "The cluster said no", error_text(exc), status=422)
    except (ConnectionError, TimeoutError) as exc:
        return message_page(request, "No answer", error_text(exc), status=503)
    except Exception as exc:
        log.exception("dashboard request %s %s failed", request.method, request.path)
        return message_page(
            request,
            "Something went wrong",
            f"{type(exc).__name__}: {exc} (the console's log has the details)",
            status=500,
        )


def _fmt_ms(value: object) -> str:
    if not isinstance(value, int | float) or value <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value / 1000)) + (
        f".{int(value) % 1000:03d}"
    )


def _fmt_bytes(value: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def _fmt_num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "-" if value is None else str(value)


FILTERS: dict[str, Callable[[Any], str]] = {
    "ms": _fmt_ms,
    "bytes": _fmt_bytes,
    "num": _fmt_num,
}
