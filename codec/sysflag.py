"""The ``sysFlag`` bits of a message, on the wire and in a stored record.

RocketMQ counterpart: ``common/sysflag/MessageSysFlag`` (protocol.md §9.3,
store-format.md §2).
"""

from __future__ import annotations

from typing import Final

COMPRESSED_FLAG: Final = 0x1
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_NOT_TYPE: Final = 0x0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
TRANSACTION_TYPE_MASK: Final = 0xC
BORNHOST_V6_FLAG: Final = 0x10
STOREHOSTADDRESS_V6_FLAG: Final = 0x20
V6_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
# Bits 8-10 name the compression of a COMPRESSED body (RocketMQ 5's CompressionType):
# 1 LZ4, 2 ZSTD, 3 ZLIB. 4.x clients leave them 0 and mean zlib.
COMPRESSION_MASK: Final = 0x700
COMPRESSION_ZLIB: Final = 0x300  # type 3, as Java 4.9.8 sends
