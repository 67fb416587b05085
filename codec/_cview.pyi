"""Typed stub of the compiled record decoder (codec/_cview.pyx): the signatures of the pure
functions of codec/view.py it stands in for."""

from typing import TypeVar

from codec.view import MessageExt

V = TypeVar("V", bound=MessageExt)

def decode_records(body: bytes | memoryview, broker_name: str, make: type[V]) -> list[V]: ...
def attach_lazy_fields(cls: type[MessageExt]) -> None: ...
