"""The web console beside ``aerolite standalone``: a child process the broker starts, waits
for and stops.

RocketMQ counterpart: none in the broker (rocketmq-dashboard is a separate application an
operator deploys). The console is a client of the cluster (``client.dashboard``, built on
the admin client), and the broker never imports client code; so the standalone process runs
``python -m client.dashboard`` against its own name server, as a deployment would, and reads
the console's ready line before printing its own. The child's stdin is a pipe from here:
when this process ends, even by ``kill -9``, the pipe closes and the console exits with it.
Secrets travel in the child's environment, never in its arguments (which ``ps`` shows).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from dataclasses import dataclass

import structlog

from broker.config import BrokerConfig
from remoting.errors import ConfigError
from remoting.tls import TlsMode

log = structlog.get_logger(__name__)

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
READY_PREFIX = "ready dashboard="


@dataclass
class ConsoleChild:
    """The running console: its URL (``http://HOST:PORT``) and its process."""

    url: str
    process: asyncio.subprocess.Process

    async def stop(self) -> None:
        process = self.process
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if process.stdin is not None:
            process.stdin.close()
        log.info("dashboard_stopped", returncode=process.returncode)


def _arguments(config: BrokerConfig, namesrv: str) -> list[str]:
    args = [
        "-m",
        "client.dashboard",
        "-n",
        namesrv,
        "--host",
        config.bind_address,
        "--port",
        str(config.dashboard_port),
        "--exit-with-stdin",
    ]
    if config.dashboard_users_file is not None:
        args += ["--set", f"dashboardUsersFile={config.dashboard_users_file}"]
    if config.dashboard_access_key:
        args += ["--set", f"dashboardAccessKey={config.dashboard_access_key}"]
    if config.tls_client_enabled:
        # the console dials this broker as the broker dials its name servers
        args.append("--tls")
        if config.tls_client_trust_cert_path is not None and config.tls_client_verifies:
            args += ["--tls-ca", str(config.tls_client_trust_cert_path)]
        elif not config.tls_client_verifies:
            args.append("--tls-insecure")
    if config.tls_server_mode is TlsMode.ENFORCING:
        # no listener of this process takes plaintext: the console serves HTTPS with the
        # broker's own certificate
        args += ["--https-cert", str(config.tls_server_cert_path)]
        args += ["--https-key", str(config.tls_server_key_path)]
    return args


async def start_console(config: BrokerConfig, namesrv: str) -> ConsoleChild:
    """Start the console for the name server at ``namesrv`` and wait for its ready line.

    Raises:
        ConfigError: it exited or said nothing in time (its own message, e.g. the port in
            use or a malformed user entry, is on stderr, which it shares with this process).
    """
    env = dict(os.environ)
    env.pop("AEROLITE_DASHBOARD_USERS", None)
    if config.dashboard_users:
        env["AEROLITE_DASHBOARD_USERS"] = config.dashboard_users
    if config.dashboard_secret_key:
        env["AEROLITE_DASHBOARD_SECRET_KEY"] = config.dashboard_secret_key
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *_arguments(config, namesrv),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)
    except TimeoutError:
        line = b""
    text = line.decode(errors="replace").strip()
    if not text.startswith(READY_PREFIX):
        await ConsoleChild("", process).stop()
        raise ConfigError(
            f"the web console did not start on {config.bind_address}:{config.dashboard_port} "
            "(its message is above; set dashboardPort to a free port, or enableDashboard=false)"
        )
    url = text.removeprefix(READY_PREFIX)
    log.info("dashboard_started", url=url, pid=process.pid)
    return ConsoleChild(url, process)
