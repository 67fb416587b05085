"""The console's producers page and its ACL accounts page.

RocketMQ counterpart: rocketmq-dashboard's ``ProducerController`` (a group's connections on
the brokers of a topic, GET_PRODUCER_CONNECTION_LIST) and the ACL 1.0 ``AclController`` of
its 2.0.0 release (plain_acl.yml accounts and the global white list, the form that fits a
4.x broker with ``aclEnable=true``). The dashboard makes the operator type a producer group;
here the groups come from GET_ALL_PRODUCER_INFO (4.9.4+, and ours), with the typed lookup
kept for brokers that do not know that code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from client.admin import Admin
from client.dashboard.app import (
    BadInput,
    checked_group,
    checked_topic,
    console_of,
    done,
    form_text,
    render,
)
from client.errors import BrokerError
from remoting.bodies import AclConfigBody
from remoting.codes import ResponseCode
from remoting.headers import CreateAccessConfigRequestHeader

PERMS = ("DENY", "PUB", "SUB", "PUB|SUB")
ACCESS_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/producers", producers)
    router.add_get("/acl", acl)
    router.add_post("/acl/accounts", save_account)
    router.add_post("/acl/accounts/{access_key}/delete", delete_account)
    router.add_post("/acl/white", save_white_list)


# ------------------------------------------------------------------------ producers


async def _producer_groups(admin: Admin) -> tuple[dict[str, list[dict[str, Any]]], str | None]:
    """Every producer group's instances on every master, and why the list is incomplete."""
    groups: dict[str, list[dict[str, Any]]] = {}
    missing: list[str] = []
    for addr in await admin.all_masters():
        try:
            table = await admin.all_producer_info(addr)
        except BrokerError as exc:
            if exc.response_code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise
            missing.append(addr)
            continue
        for group, instances in table.items():
            for item in instances:
                groups.setdefault(group, []).append({**item, "broker": addr})
    note = (
        f"{', '.join(missing)} cannot list producer groups (GET_ALL_PRODUCER_INFO is "
        "RocketMQ 4.9.4+): look one up by group and topic below."
        if missing
        else None
    )
    return dict(sorted(groups.items())), note


async def producers(request: web.Request) -> web.Response:
    admin = console_of(request).admin
    groups, note = await _producer_groups(admin)
    group = request.query.get("group", "").strip()
    topic = request.query.get("topic", "").strip()
    found: list[dict[str, Any]] | None = None
    if group or topic:
        if not group or not topic:
            raise BadInput("a lookup needs both a producer group and a topic")
        checked_group(group)
        checked_topic(topic)
        found = await admin.producer_connection(group, topic)
    return render(
        request,
        "producers.html",
        {"groups": groups, "note": note, "group": group, "topic": topic, "found": found},
    )


# ------------------------------------------------------------------------------ ACL


async def _acl_state(admin: Admin) -> tuple[list[str], AclConfigBody | None, str | None]:
    """The masters, one master's ACL file (they are kept alike) and, when ACL is off or the
    console may not read it, why."""
    masters = await admin.all_masters()
    if not masters:
        return masters, None, "No broker is registered with the name server."
    try:
        configs = await asyncio.gather(*(admin.broker_config(a) for a in masters))
        if not any(c.get("aclEnable", "false").lower() == "true" for c in configs):
            why = "ACL is off on every broker (aclEnable=false): nothing to manage."
            return masters, None, why
        return masters, await admin.acl_config(masters[0]), None
    except BrokerError as exc:
        if exc.response_code == ResponseCode.NO_PERMISSION:
            why = (
                "The brokers require ACL credentials for this: start the console with "
                "dashboardAccessKey and dashboardSecretKey of an admin account."
            )
            return masters, None, f"{why} ({exc.remark})"
        raise


async def acl(request: web.Request) -> web.Response:
    masters, config, why = await _acl_state(console_of(request).admin)
    return render(
        request,
        "acl.html",
        {"masters": masters, "config": config, "why": why, "perms": PERMS},
    )


def _perm_list(text: str, what: str) -> str:
    """``name=PERM`` entries, one per line or comma-separated, checked; the wire's form."""
    entries = [e.strip() for line in text.splitlines() for e in line.split(",") if e.strip()]
    for entry in entries:
        name, sep, perm = entry.partition("=")
        if not sep or not name.strip() or perm.strip() not in PERMS:
            raise BadInput(f"{what} entry {entry!r}: expected NAME=PERM with PERM one of {PERMS}")
    return ",".join(entries)


async def _on_every_master(
    request: web.Request, change: Callable[[Admin, str], Awaitable[None]]
) -> int:
    """``change`` on every master, one after another (the ACL files are kept alike, and
    the first refusal stops the rest); how many it was made on."""
    admin = console_of(request).admin
    masters = await admin.all_masters()
    for addr in masters:
        await change(admin, addr)
    return len(masters)


async def save_account(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    access_key = form_text(form, "accessKey")
    secret_key = form_text(form, "secretKey")
    if not access_key or not set(access_key) <= ACCESS_KEY_CHARS or len(access_key) < 6:
        raise BadInput("an access key is at least 6 letters, digits, _ or -")
    if secret_key and len(secret_key) < 6:
        raise BadInput("a secret key is at least 6 characters")
    for name in ("defaultTopicPerm", "defaultGroupPerm"):
        if form_text(form, name) and form_text(form, name) not in PERMS:
            raise BadInput(f"{name} must be one of {PERMS}")
    fields = CreateAccessConfigRequestHeader(
        access_key=access_key,
        secret_key=secret_key or None,
        white_remote_address=form_text(form, "whiteRemoteAddress") or None,
        default_topic_perm=form_text(form, "defaultTopicPerm") or None,
        default_group_perm=form_text(form, "defaultGroupPerm") or None,
        topic_perms=_perm_list(form_text(form, "topicPerms"), "topic permission") or None,
        group_perms=_perm_list(form_text(form, "groupPerms"), "group permission") or None,
        admin=form.get("admin") == "on",
    ).to_ext_fields()
    count = await _on_every_master(
        request, lambda admin, addr: admin.update_acl_config(addr, fields)
    )
    return done(request, f"Account {access_key} saved on {count} broker(s).", "/acl")


async def delete_account(request: web.Request) -> web.StreamResponse:
    access_key = request.match_info["access_key"]
    form = await request.post()
    if form_text(form, "confirm") != access_key:
        raise BadInput(f"type the access key {access_key} to confirm its deletion")
    count = await _on_every_master(
        request, lambda admin, addr: admin.delete_acl_config(addr, access_key)
    )
    return done(request, f"Account {access_key} deleted on {count} broker(s).", "/acl")


async def save_white_list(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    addresses = ",".join(
        a.strip() for a in form_text(form, "addresses").replace("\n", ",").split(",") if a.strip()
    )
    await _on_every_master(
        request, lambda admin, addr: admin.update_global_white_addrs(addr, addresses)
    )
    return done(request, "The global white list is saved.", "/acl")
