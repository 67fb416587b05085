"""Logging setup for the server processes.

RocketMQ counterpart: the logback configuration of the broker and name server.

JSON lines in production, a console renderer on a terminal; always to stderr, because stdout
carries the one ``ready …`` line that scripts and tests wait for. Called only from
``__main__``.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(*, json: bool | None = None, level: str = "info") -> None:
    """Configure structlog once for this process.

    Args:
        json: JSON lines; None picks JSON unless stderr is a terminal.
        level: the lowest level written (debug, info, warning, error).
    """
    if json is None:
        json = not sys.stderr.isatty()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
