"""Who may change things in the console: users with hashed passwords, sessions, CSRF tokens.

RocketMQ counterpart: rocketmq-dashboard's ``UserService`` / ``AuthInterceptor`` /
``users.properties`` (``name=password[,1]``), which keeps passwords in plain text, compares
them with ``equals`` and has login off by default. Here a password is only ever held as a
salted scrypt hash (the standard library's; the parameters travel in the stored text so they
can be raised later), a session is a random token held in this process's memory (a restart
logs everyone out), and every state-changing request carries the session's CSRF token.

Users come from ``dashboardUsers`` (``name:secret;name:secret``) and from
``dashboardUsersFile`` (one ``name=secret`` per line, ``#`` comments); a secret is either a
hash made by ``aerolite dashboard --hash-password`` or a plain password, hashed on load.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from client.errors import InvalidArgumentError

SCRYPT_N = 1 << 15
SCRYPT_R = 8
SCRYPT_P = 1
# OpenSSL's default cap (32 MiB) is below what n=2^15, r=8 needs (128 * n * r = 32 MiB + slack)
SCRYPT_MAXMEM = 64 << 20
HASH_PREFIX = "scrypt$"
SESSION_IDLE_S = 8 * 3600.0
FAILED_LOGINS_PER_MINUTE = 10
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@")


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode(), salt=salt, n=n, r=r, p=p, maxmem=SCRYPT_MAXMEM, dklen=32
    )


def hash_password(password: str) -> str:
    """``scrypt$n=32768,r=8,p=1$<salt>$<hash>`` (base64), for a users file or --set."""
    if not password:
        raise InvalidArgumentError("a password cannot be empty")
    salt = os.urandom(16)
    digest = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"{HASH_PREFIX}n={SCRYPT_N},r={SCRYPT_R},p={SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def _parse_hash(stored: str) -> tuple[int, int, int, bytes, bytes]:
    try:
        _scheme, params, salt, digest = stored.split("$")
        values = dict(kv.split("=", 1) for kv in params.split(","))
        n, r, p = int(values["n"]), int(values["r"]), int(values["p"])
        return n, r, p, base64.b64decode(salt), base64.b64decode(digest)
    except (ValueError, KeyError) as exc:
        raise InvalidArgumentError(
            f"a password hash must look like {HASH_PREFIX}n=…,r=…,p=…$<salt>$<hash>: {exc}"
        ) from None


def verify_password(password: str, stored: str) -> bool:
    n, r, p, salt, digest = _parse_hash(stored)
    return hmac.compare_digest(_scrypt(password, salt, n, r, p), digest)


def _stored(secret: str) -> str:
    if secret.startswith(HASH_PREFIX):
        _parse_hash(secret)  # a malformed hash is named at start, not at the first login
        return secret
    return hash_password(secret)


def _check_name(name: str, where: str) -> str:
    if not name or not set(name) <= NAME_CHARS or len(name) > 64:
        raise InvalidArgumentError(
            f"{where}: user name {name!r} must be 1-64 letters, digits or _ . - @"
        )
    return name


def parse_users(inline: str = "", path: Path | None = None) -> dict[str, str]:
    """name → stored hash, from ``dashboardUsers`` text and a users file.

    Raises:
        InvalidArgumentError: a malformed entry (named with where it came from), or an
            unreadable file.
    """
    users: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in inline.split(";"))):
        name, sep, secret = part.partition(":")
        if not sep or not secret:
            raise InvalidArgumentError(
                f"dashboardUsers: {name!r} needs NAME:PASSWORD (or NAME:{HASH_PREFIX}…)"
            )
        users[_check_name(name.strip(), "dashboardUsers")] = _stored(secret)
    if path is not None:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise InvalidArgumentError(f"dashboardUsersFile {path}: {exc.strerror}") from None
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            name, sep, secret = text.partition("=")
            where = f"{path}:{number}"
            if not sep or not secret.strip():
                raise InvalidArgumentError(f"{where}: expected NAME=PASSWORD_HASH")
            users[_check_name(name.strip(), where)] = _stored(secret.strip())
    return users


@dataclass(slots=True)
class Session:
    user: str
    csrf: str
    last_seen: float
    # what the next page shows once (a change's outcome, after Post/Redirect/Get)
    notices: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Accounts:
    """The users, the live sessions and the failed-login counts of one console process."""

    users: dict[str, str]
    sessions: dict[str, Session] = field(default_factory=dict)
    _failures: dict[str, list[float]] = field(default_factory=dict)
    # an unknown user is checked against this, so both refusals take the same time
    _dummy: str = field(default_factory=lambda: hash_password(secrets.token_hex(8)))

    def login(self, name: str, password: str, peer: str) -> tuple[str, Session] | None:
        """A new session and its cookie token, or None for a wrong name or password (the same
        answer for both), and for a peer with too many failures in the last minute."""
        now = time.monotonic()
        self._sweep(now)
        recent = self._recent(peer, now)
        if len(recent) >= FAILED_LOGINS_PER_MINUTE:
            return None
        stored = self.users.get(name)
        ok = verify_password(password, stored or self._dummy) and stored is not None
        if not ok:
            self._failures[peer] = [*recent, now]
            return None
        self._failures.pop(peer, None)
        session = Session(name, secrets.token_urlsafe(32), now)
        token = secrets.token_urlsafe(32)
        self.sessions[token] = session
        return token, session

    def throttled(self, peer: str) -> bool:
        return len(self._recent(peer, time.monotonic())) >= FAILED_LOGINS_PER_MINUTE

    def _recent(self, peer: str, now: float) -> list[float]:
        """``peer``'s failed logins of the last minute (older ones forgotten)."""
        recent = [t for t in self._failures.get(peer, []) if now - t < 60.0]
        if recent:
            self._failures[peer] = recent
        else:
            self._failures.pop(peer, None)
        return recent

    def _sweep(self, now: float) -> None:
        """Forget idle sessions and old failures at each login, so neither table grows with
        sessions nobody ends or addresses that stopped trying."""
        for token in [t for t, s in self.sessions.items() if now - s.last_seen > SESSION_IDLE_S]:
            del self.sessions[token]
        for peer in list(self._failures):
            self._recent(peer, now)

    def session(self, token: str | None) -> Session | None:
        if not token:
            return None
        session = self.sessions.get(token)
        now = time.monotonic()
        if session is None or now - session.last_seen > SESSION_IDLE_S:
            self.sessions.pop(token, None)
            return None
        session.last_seen = now
        return session

    def logout(self, token: str | None) -> None:
        if token:
            self.sessions.pop(token, None)
