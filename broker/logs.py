"""Logging setup for the server processes.

RocketMQ counterpart: the logback configuration of the broker and name server.

JSON lines in production, a console renderer on a terminal; always to stderr, because stdout
carries the one ``ready …`` line that scripts and tests wait for. Called only from
``__main__``.

Two kinds of records meet here. The broker and the store log through structlog; ``remoting``
(shared with the SDK, which is a library) and third-party code log through the standard
``logging`` module. Both end in one ``logging`` handler on the root logger whose
``structlog.stdlib.ProcessorFormatter`` renders every line the same way, one lock and one
stream for all. A stdlib record written in our convention, ``"event_name key=%s key=%s"``
with its values as arguments, is taken apart again (``event_fields``), so a remoting line
reads ``{"event": "connection_closed", "peer": …, "reason": …}`` exactly as it did when
remoting logged through structlog; any other stdlib record keeps its text as the event and
names its logger.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

# "connection_closed peer=%s reason=%s": a snake_case event, then key=%s (or %r, %d) words.
_EVENT = re.compile(r"[a-z][a-z0-9_]*")
_FIELD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=%([sdr])")


def _value(arg: object, conversion: str) -> object:
    # JSON keeps numbers, strings, lists and dicts as they are; anything else (an exception, a
    # MessageQueue) becomes the text logging itself would have printed for it.
    if arg is None or isinstance(arg, str | int | float) or type(arg) in (list, dict):
        return arg
    return repr(arg) if conversion == "r" else str(arg)


def event_fields(record: logging.LogRecord) -> dict[str, Any] | None:
    """``{"event": …, key: value, …}`` of a stdlib record in our message convention.

    None when the record does not follow it (a third-party message, or one whose arguments
    do not match its ``key=%s`` words).
    """
    return _fields(record.msg, record.args)


def _fields(msg: object, args: object) -> dict[str, Any] | None:
    if not isinstance(msg, str):
        return None
    if args is None:
        args = ()
    if not isinstance(args, tuple):
        return None  # a mapping: "%(name)s" style, not ours
    words = msg.split(" ")
    if not _EVENT.fullmatch(words[0]) or len(words) - 1 != len(args):
        return None
    fields: dict[str, Any] = {"event": words[0]}
    for word, arg in zip(words[1:], args, strict=True):
        match = _FIELD.fullmatch(word)
        if match is None:
            return None
        fields[match[1]] = _value(arg, match[2])
    return fields


def _from_stdlib(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """Foreign-record step: restore the event name and its keys from the message."""
    record: logging.LogRecord = event_dict["_record"]
    # ProcessorFormatter hands the arguments over here and has emptied them on its copy of
    # the record, whose message it then replaces with the rendered line.
    fields = _fields(record.msg, event_dict.pop("positional_args", ()))
    if fields is None:
        event_dict["logger"] = record.name
        return event_dict
    event_dict.update(fields)
    return event_dict


def configure_logging(*, json: bool | None = None, level: str = "info") -> None:
    """Configure structlog and the root ``logging`` handler once for this process.

    Args:
        json: JSON lines; None picks JSON unless stderr is a terminal.
        level: the lowest level written (debug, info, warning, error), for structlog's
            loggers and for the standard library's (``remoting.*``, third-party) alike.
    """
    if json is None:
        json = not sys.stderr.isatty()
    threshold = logging.getLevelNamesMapping()[level.upper()]
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        # Filtering here keeps a disabled structlog call as cheap as before: no record built.
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name("aerolite")
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[_from_stdlib, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            pass_foreign_args=True,
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "aerolite"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(threshold)
