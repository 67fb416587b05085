"""The console's overview, login, live stream and metric pages.

RocketMQ counterpart: rocketmq-dashboard's ``ClusterController`` (brokers with their TPS and
runtime table), ``DashboardController`` (charts, polled) and ``LoginController``. The
overview here adds what an operator of a replicated store looks for first: disk use,
commit-log dispatch and flush lag, and each slave's replication lag; its figures and charts
follow ``/events``, one server-sent event per sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp
from aiohttp import web

from client.dashboard.app import (
    COOKIE,
    BadInput,
    console_of,
    render,
    see_other,
)
from client.dashboard.sampler import CLUSTER_FAILURES

EVENT_WAIT_S = 15.0  # a comment line at least this often keeps proxies from closing the stream
METRICS_FETCH_S = 3.0
METRICS_FAILURES: tuple[type[Exception], ...] = (
    *CLUSTER_FAILURES,
    aiohttp.ClientError,
    TimeoutError,
)
MAX_SERIES_KEYS = 64


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/", overview)
    router.add_get("/brokers/{addr}", broker_detail)
    router.add_get("/login", login_form)
    router.add_post("/login", login)
    router.add_post("/logout", logout)
    router.add_get("/events", events)
    router.add_get("/api/series", series)
    router.add_get("/metric", metric)
    router.add_get("/healthz", healthz)


async def healthz(request: web.Request) -> web.Response:
    """A healthcheck's answer (``aerolite ping http://H:P/healthz``, the compose file's): 200
    while the console serves, the text saying what its last look at the cluster saw. A name
    server that does not answer is the cluster's trouble, which the pages show, not the
    console's, so it does not make the console unhealthy."""
    sampler = console_of(request).sampler
    if sampler.error:
        seen = f"last sample: {sampler.error}"
    elif not sampler.sampled_at:
        seen = "not sampled yet"
    else:
        seen = f"{len(sampler.brokers)} broker(s) seen {time.time() - sampler.sampled_at:.0f} s ago"
    return web.Response(text=f"ok; {seen}\n", content_type="text/plain")


async def overview(request: web.Request) -> web.Response:
    console = console_of(request)
    sampler = console.sampler
    await sampler.ensure_sampled()
    return render(
        request,
        "overview.html",
        {
            "sampler": sampler,
            "namesrvs": console.namesrv.split(";"),
        },
    )


async def broker_detail(request: web.Request) -> web.Response:
    """A broker's runtime table and configuration (the dashboard's Status and Config)."""
    console = console_of(request)
    addr = request.match_info["addr"]
    await console.sampler.ensure_sampled()
    known = {b.addr for b in console.sampler.brokers}
    if addr not in known:
        raise BadInput(f"no broker at {addr} is registered with the name server")
    runtime, config = await asyncio.gather(
        console.admin.runtime_info(addr), console.admin.broker_config(addr)
    )
    return render(
        request,
        "broker.html",
        {
            "addr": addr,
            "runtime": dict(sorted(runtime.items())),
            "config": dict(sorted(config.items())),
        },
    )


def _safe_next(value: str | None) -> str:
    """Only a path on this console: a login link must not send anyone elsewhere."""
    if not value or not value.startswith("/") or value.startswith("//"):
        return "/"
    return value


async def login_form(request: web.Request) -> web.Response:
    return render(
        request, "login.html", {"next": _safe_next(request.query.get("next")), "failed": False}
    )


async def login(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    form = await request.post()
    name, password = str(form.get("username", "")), str(form.get("password", ""))
    target = _safe_next(str(form.get("next", "/")))
    peer = request.remote or "?"
    result = await asyncio.get_running_loop().run_in_executor(
        None, console.accounts.login, name, password, peer
    )
    if result is None:
        text = (
            "Too many failed logins from this address: wait a minute."
            if console.accounts.throttled(peer)
            else "Wrong user name or password."
        )
        return render(
            request,
            "login.html",
            {"next": target, "failed": True, "failure": text},
            status=401,
        )
    token, _session = result
    response = see_other(target)
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="Strict",
        path="/",
        secure=request.secure,
    )
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    console_of(request).accounts.logout(request.cookies.get(COOKIE))
    response = see_other("/")
    response.del_cookie(COOKIE, path="/")
    return response


async def events(request: web.Request) -> web.StreamResponse:
    """``text/event-stream``: a ``sample`` event after every round of the sampler."""
    sampler = console_of(request).sampler
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    generation = sampler.generation
    with contextlib.suppress(ConnectionError):  # the page was closed
        if sampler.sampled_at:
            await response.write(sampler.event_bytes())
        while True:
            now = await sampler.wait_for(generation, EVENT_WAIT_S)
            if now == generation:
                await response.write(b": still here\n\n")
                continue
            generation = now
            await response.write(sampler.event_bytes())
    return response


async def series(request: web.Request) -> web.Response:
    """The last hour of the charts' series: ``?key=in.B:0&key=lag.G`` → {key: [ts, values]}."""
    sampler = console_of(request).sampler
    keys = request.query.getall("key", [])[:MAX_SERIES_KEYS]
    out: dict[str, tuple[list[float], list[float]]] = {}
    for key in keys:
        kind, _, name = key.partition(".")
        out[key] = sampler.history(kind, name)
    return web.json_response(out, headers={"Cache-Control": "no-store"})


def _matching_lines(text: str, family: str, labels: dict[str, str]) -> list[str]:
    lines = []
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            if line.split(" ", 3)[2] == family:
                lines.append(line)
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name not in (
            family,
            f"{family}_total",
            f"{family}_bucket",
            f"{family}_sum",
            f"{family}_count",
        ):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            lines.append(line)
    return lines


async def metric(request: web.Request) -> web.Response:
    """One metric family's current lines, read from each broker's Prometheus port (the
    broker's ``metricsPort``), with the PromQL that selects them."""
    console = console_of(request)
    family = request.query.get("family", "")
    if not family or not family.replace("_", "").isalnum():
        raise BadInput("name a metric family: /metric?family=rocketmq_…")
    at = request.query.get("at")  # one broker process's port (a master and its slave share labels)
    labels = {k: v for k, v in request.query.items() if k not in ("family", "at")}
    selector = ",".join(f'{k}="{v}"' for k, v in labels.items())
    promql = f"{family}{{{selector}}}" if selector else family
    await console.sampler.ensure_sampled()
    found: list[tuple[str, str, list[str]]] = []
    timeout = aiohttp.ClientTimeout(total=METRICS_FETCH_S)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        for b in console.sampler.brokers:
            if at and b.addr != at:
                continue
            url = ""
            try:
                config = await console.admin.broker_config(b.addr)
                port = config.get("metricsPort")
                if not port or port == "0":  # Apache's brokers: rocketmq-exporter serves them
                    found.append((b.key, "", []))
                    continue
                host = b.addr.rsplit(":", 1)[0]
                url = f"http://{host}:{port}/metrics"
                async with http.get(url) as answer:
                    text = await answer.text()
                found.append((b.key, url, _matching_lines(text, family, labels)))
            except METRICS_FAILURES as exc:
                found.append((b.key, url, [f"# not read: {exc}"]))
    return render(
        request,
        "metric.html",
        {"family": family, "labels": labels, "promql": promql, "found": found},
    )
