"""The repository's own docs agree with the code: references resolve, codes and sizes match.

What this holds: every ``*.md`` file a module, test or doc names exists in the repository
(with every ``§`` section and quoted heading it points at), and so does every module path a
Markdown file names, the names quoted right after it being defined in that module; every
request code the broker's and the name server's processor tables register has its row in
docs/protocol.md §5, and every row there is registered; every header class of
``remoting.headers`` is described in protocol.md; and the byte sizes and offsets
docs/store-format.md and protocol.md quote are the ones the code packs (its ``struct`` formats
and size constants).
"""

from __future__ import annotations

import ast
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

import broker.timer
import codec.batch
import codec.record
import codec.units
import remoting.frame
import remoting.header_codec
import remoting.headers
import store.checkpoint
import store.commit_log
import store.consume_queue
import store.ha
import store.index_file
from broker.broker import Broker
from broker.config import BrokerConfig, NamesrvConfig
from broker.namesrv.server import NameServer
from codec import host_of, offset_msg_id
from codec.msgid import UniqIdGenerator
from remoting.codes import RequestCode
from remoting.header_codec import HeaderFields
from store.config import StoreConfig

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PROTOCOL = DOCS / "protocol.md"
STORE_FORMAT = DOCS / "store-format.md"

# Where references are looked for: the packages, the tests, the docs and the build files.
_SCANNED_DIRS = ("codec", "remoting", "store", "broker", "client", "tests", "docs", "docker")
_SCANNED_SUFFIXES = frozenset({".py", ".pyx", ".pxd", ".pyi", ".md"})
_SCANNED_FILES = ("README.md", "Makefile", "pyproject.toml", "setup.py", "MANIFEST.in")
_SKIPPED_PARTS = frozenset({"node_modules", "__pycache__", "build", "aerolite.egg-info"})


def _walk(top: Path) -> Iterator[Path]:
    """Files under ``top``, third-party and hidden trees left out (not even walked)."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_PARTS and d[0] != ".")
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _scanned() -> Iterator[Path]:
    for name in _SCANNED_FILES:
        path = ROOT / name
        if path.is_file():
            yield path
    for top in _SCANNED_DIRS:
        for path in _walk(ROOT / top):
            if path.suffix in _SCANNED_SUFFIXES or path.parent.name == "docker":
                yield path


def _joined(text: str) -> str:
    """``text`` with lines joined by one space (comment markers and indentation dropped), so
    a reference wrapped over two lines reads as one."""
    return re.sub(r"[ \t]*\n[ \t]*(?:#[ \t]*)?", " ", text)


def _headings(doc: Path) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6} +(.+)$", doc.read_text(), re.M)]


def _section_numbers(doc: Path) -> set[str]:
    """Section numbers: 2 for ``## 2. Commit log``, 2.2 for ``### 2.2 Record layout``."""
    numbers = set()
    for heading in _headings(doc):
        m = re.match(r"(\d+(?:\.\d+)*)\.?(?:\s|$)", heading)
        if m:
            numbers.add(m.group(1))
    return numbers


# A file name: "docs/protocol.md", "examples/spark/README.md", "store-format.md", "STYLE.md".
_MD_NAME = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.md)\b")
# One section: "§7.2", "§1-§5", "§5-6", "section 4", "§5 "Name server"".
_SECTION_ITEM = r'(?:§ ?|section )\d+(?:\.\d+)*(?:\s*-\s*§?\s*\d+(?:\.\d+)*)?(?: "[^"]+")?'
# The sections after a doc's name: "protocol.md §7.2, §9.4, §12", "store-format.md §12 and §6".
_SECTION_REF = re.compile(
    rf"(protocol|store-format)\.md\)?((?:(?:[ ,]|and |or )+{_SECTION_ITEM})+)"
)
_SECTION_NUMBER = re.compile(r"(\d+(?:\.\d+)*)(?:\s*-\s*§?\s*(\d+(?:\.\d+)*))?")
# A heading quoted beside the file it is in: 'README.md ("Spark")',
# '"Security" and "Faults" in [docs/operations.md]', '(docs/operations.md, "What a …")'.
_QUOTED_AFTER = re.compile(r"((?:[\w-]+/)*[\w-]+\.md)\]?(?:\([\w./-]+\))?,? \(?\"([^\"]+)\"")
_QUOTED_BEFORE = re.compile(r"\"([^\"]+)\"((?: and \"[^\"]+\")*) in \[?((?:[\w-]+/)*[\w-]+\.md)")


def _md_files() -> dict[str, list[Path]]:
    """Every Markdown file of the repository (outside third-party trees) by its name."""
    found: dict[str, list[Path]] = {}
    for path in _walk(ROOT):
        if path.suffix == ".md":
            found.setdefault(path.name, []).append(path)
    return found


def _resolve(name: str, source: Path, md_files: dict[str, list[Path]]) -> Path | None:
    """The file ``name`` points at, seen from ``source``: a path from the repository root or
    from ``source``'s directory, or a bare name found anywhere (a doc's own neighbour first)."""
    if "/" in name:
        for base in (ROOT, source.parent):
            if (base / name).is_file():
                return base / name
        return None
    if (source.parent / name).is_file():
        return source.parent / name
    if (DOCS / name).is_file():
        return DOCS / name
    candidates = md_files.get(name)
    return candidates[0] if candidates else None


def test_every_md_file_named_exists() -> None:
    """A reference to a Markdown file names one in this repository (not ../shared)."""
    md_files = _md_files()
    missing: list[str] = []
    for path in _scanned():
        if path == Path(__file__).resolve():
            continue
        text = path.read_text(errors="replace")
        for m in _MD_NAME.finditer(text):
            if _resolve(m.group(1), path, md_files) is None:
                line = text.count("\n", 0, m.start()) + 1
                missing.append(f"{path.relative_to(ROOT)}:{line}: {m.group(1)}")
    assert not missing, "references to files not in the repository:\n" + "\n".join(missing)


def test_every_docs_path_exists() -> None:
    """``docs/<anything>`` named in code or docs (plots, the dashboard) exists."""
    missing: list[str] = []
    for path in _scanned():
        text = path.read_text(errors="replace")
        for m in re.finditer(r"(?<![\w./-])docs/([\w./-]*[\w-])", text):
            target = ROOT / "docs" / m.group(1)
            if not target.exists():
                missing.append(f"{path.relative_to(ROOT)}: docs/{m.group(1)}")
    assert not missing, "\n".join(missing)


# A module's path: "store/commit_log.py", "codec/_cview.pyx", "broker/processors/pull.py".
_MODULE_PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.(?:py|pyx|pxd|pyi))\b")
# A module quoted with the names it is cited for right after it: "`store/ha.py` `HAService`",
# "`remoting/frame.py` (`FrameDecoder`, `frame_prefix`)", "`remoting/bodies.py` `A.encode` /
# `decode`" (a bare name after ``A.b`` may be another member of ``A``).
_MODULE_NAMES = re.compile(r"`((?:[\w-]+/)+[\w-]+\.py)`,? \(?((?:`[^`/]+`(?:, | and | or | / )?)+)")
# One such name: "HAService", "CommitLog.put_batch", "walk()", "RECORD_HEADERS[4, 4]", "POS_*".
_CITED_NAME = re.compile(r"([A-Za-z_]\w*\*?)((?:\.\w+)*)(?:\(.*\)|\[.*\])?")


def _markdown() -> Iterator[Path]:
    """The scanned Markdown files."""
    return (path for path in _scanned() if path.suffix == ".md")


def test_every_module_path_in_the_docs_exists() -> None:
    """``store/commit_log.py`` and the like, named in a Markdown file, exist (from the
    repository root or from the file's own directory)."""
    missing: list[str] = []
    checked = 0
    for path in _markdown():
        text = path.read_text(errors="replace")
        for m in _MODULE_PATH.finditer(text):
            checked += 1
            if not any((base / m.group(1)).is_file() for base in (ROOT, path.parent)):
                line = text.count("\n", 0, m.start()) + 1
                missing.append(f"{path.relative_to(ROOT)}:{line}: {m.group(1)}")
    assert checked > 100, f"only {checked} module paths found: is the pattern still right?"
    assert not missing, "modules not in the repository:\n" + "\n".join(missing)


def _definitions(source: str) -> tuple[set[str], dict[str, set[str]]]:
    """The names a module defines at its top level (functions, classes, assignments,
    imports, also under ``if``/``try``), and per class of it the names its body defines or
    assigns (``self.x = ...`` included)."""
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    top: set[str] = set()
    members: dict[str, set[str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, scopes):
            top.add(node.name)
            if isinstance(node, ast.ClassDef):
                members[node.name] = names = set()
                for sub in ast.walk(node):
                    if isinstance(sub, scopes):
                        names.add(sub.name)
                    elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                        names.update(_assigned(sub))
            continue
        for sub in ast.walk(node):
            if isinstance(sub, scopes):
                top.add(sub.name)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                top.update((a.asname or a.name).split(".")[0] for a in sub.names)
            elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                top.update(_assigned(sub))
    return top, members


def _assigned(node: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = set()
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                names.add(sub.attr)
    return names


def undefined_names(source: str, cited: list[str]) -> list[str]:
    """The names of ``cited`` (as quoted after the module's path) that ``source`` does not
    define: ``Name``, ``Class.member``, ``PREFIX_*``; after ``Class.member``, a bare name
    that is no top-level one is looked for in that class."""
    top, members = _definitions(source)
    missing: list[str] = []
    owner: str | None = None
    for quoted in cited:
        m = _CITED_NAME.fullmatch(quoted)
        if m is None:
            missing.append(quoted)
            continue
        head, rest = m.group(1), m.group(2).lstrip(".")
        if head.endswith("*"):
            found = any(name.startswith(head[:-1]) for name in top)
        elif rest:
            owner = head
            found = head in members and rest.split(".")[0] in members[head]
        else:
            found = head in top or (owner is not None and head in members.get(owner, ()))
        if not found:
            missing.append(quoted)
    return missing


def test_names_cited_with_a_module_are_defined_there() -> None:
    """The names quoted right after a Python module's path ("`store/ha.py` `HAService`")
    are defined in that module: a class, a function, a constant, a class's method or field."""
    missing: list[str] = []
    checked = 0
    for path in _markdown():
        text = _joined(path.read_text(errors="replace"))
        for m in _MODULE_NAMES.finditer(text):
            module = ROOT / m.group(1)
            if not module.is_file():
                continue  # the test above's
            cited = re.findall(r"`([^`]+)`", m.group(2))
            checked += len(cited)
            missing.extend(
                f"{path.relative_to(ROOT)}: {m.group(1)} `{name}`"
                for name in undefined_names(module.read_text(), cited)
            )
    assert checked > 80, f"only {checked} names found: is the pattern still right?"
    assert not missing, "names not defined where the docs say:\n" + "\n".join(missing)


_SAMPLE_MODULE = """
import os
from collections import deque as queue_type

LIMIT = 3
POS_MAGIC = 4
if os.name == "posix":
    FAST = True


def helper() -> None:
    inner = 1


class Store:
    SIZE = 8

    def __init__(self) -> None:
        self.offsets = {}

    def put(self) -> None:
        def nested() -> None: ...
"""


@pytest.mark.parametrize(
    ("cited", "missing"),
    [
        (["LIMIT", "helper()", "Store", "os", "queue_type", "FAST"], []),
        (["Store.put", "Store.SIZE", "Store.offsets", "Store.__init__"], []),
        (["POS_*", "Store.put()", "LIMIT[0]"], []),
        (["Store.put", "offsets"], []),  # a member of the class named before it
        (
            ["offsets", "inner", "nested", "Store.get", "Other.put", "OS_*"],
            ["offsets", "inner", "nested", "Store.get", "Other.put", "OS_*"],
        ),
        (["a + b"], ["a + b"]),
    ],
)
def test_the_name_checker(cited: list[str], missing: list[str]) -> None:
    assert undefined_names(_SAMPLE_MODULE, cited) == missing


def test_the_module_patterns_find_what_the_docs_write() -> None:
    text = _joined(
        "`remoting/frame.py` (`FrameDecoder`, `frame_prefix`), `store/ha.py` `HAService`\n"
        "and `remoting/bodies.py` `RegisterBrokerBody.encode` / `decode`; see codec/_cview.pyx,\n"
        "`remoting/route.py`, `remoting/codes.py` (`RequestCode`),\n"
        "not store/ha.txt or prefix/store/ha.pyc."
    )
    assert [m.group(1) for m in _MODULE_PATH.finditer(text)] == [
        "remoting/frame.py",
        "store/ha.py",
        "remoting/bodies.py",
        "codec/_cview.pyx",
        "remoting/route.py",
        "remoting/codes.py",
    ]
    cited = {m.group(1): re.findall(r"`([^`]+)`", m.group(2)) for m in _MODULE_NAMES.finditer(text)}
    assert cited == {
        "remoting/frame.py": ["FrameDecoder", "frame_prefix"],
        "store/ha.py": ["HAService"],
        "remoting/bodies.py": ["RegisterBrokerBody.encode", "decode"],
        "remoting/codes.py": ["RequestCode"],  # a module listed after another is no name
    }


def test_every_section_referenced_exists() -> None:
    """``protocol.md §7.2``, ``store-format.md §2.4`` and the like name real sections."""
    numbers = {
        "protocol": _section_numbers(PROTOCOL),
        "store-format": _section_numbers(STORE_FORMAT),
    }
    headings = {"protocol": _headings(PROTOCOL), "store-format": _headings(STORE_FORMAT)}
    missing: list[str] = []
    seen = 0
    for path in _scanned():
        text = _joined(path.read_text(errors="replace"))
        for m in _SECTION_REF.finditer(text):
            doc, refs = m.group(1), m.group(2)
            for n in _SECTION_NUMBER.finditer(refs):
                for number in filter(None, n.groups()):
                    seen += 1
                    if number not in numbers[doc]:
                        missing.append(f"{path.relative_to(ROOT)}: {doc}.md §{number}")
            missing.extend(
                f'{path.relative_to(ROOT)}: {doc}.md "{quoted}"'
                for quoted in re.findall(r"\"([^\"]+)\"", refs)
                if not any(h.startswith(quoted) for h in headings[doc])
            )
    assert seen > 50, f"only {seen} section references found: is the pattern still right?"
    assert not missing, "sections not in the docs:\n" + "\n".join(missing)


def test_sections_referenced_inside_the_docs_exist() -> None:
    """A bare "§12" in protocol.md is its own §12; one right after a link to the other doc
    ("[store-format.md](store-format.md) §11") is that doc's."""
    numbers = {
        PROTOCOL.name: _section_numbers(PROTOCOL),
        STORE_FORMAT.name: _section_numbers(STORE_FORMAT),
    }
    missing: list[str] = []
    for doc in (PROTOCOL, STORE_FORMAT):
        text = _joined(doc.read_text())
        for m in re.finditer(_SECTION_ITEM, text):
            before = text[max(0, m.start() - 40) : m.start()]
            named = re.findall(
                r"(protocol|store-format)\.md\)?(?:[ ,]|and |or |§[\d.-]+)*$", before
            )
            target = f"{named[-1]}.md" if named else doc.name
            missing.extend(
                f"{doc.name}: {target} §{number}"
                for n in _SECTION_NUMBER.finditer(m.group(0))
                for number in filter(None, n.groups())
                if number not in numbers[target]
            )
    assert not missing, "\n".join(missing)


def test_every_quoted_heading_exists() -> None:
    """'README.md ("Spark")' and '"Security" in [docs/operations.md]' name real headings."""
    md_files = _md_files()
    missing: list[str] = []
    checked = 0
    for path in _scanned():
        if path == Path(__file__).resolve():
            continue
        text = _joined(path.read_text(errors="replace"))
        refs: list[tuple[str, str]] = [
            (m.group(1), m.group(2)) for m in _QUOTED_AFTER.finditer(text)
        ]
        for m in _QUOTED_BEFORE.finditer(text):
            names = [m.group(1), *re.findall(r"\"([^\"]+)\"", m.group(2))]
            refs += [(m.group(3), name) for name in names]
        checked += len(refs)
        for file_name, quoted in refs:
            target = _resolve(file_name, path, md_files)
            if target is None or file_name.split("/")[-1] in ("protocol.md", "store-format.md"):
                continue  # a missing file is the test above's; sections are checked above
            if not any(h.startswith(quoted) for h in _headings(target)):
                missing.append(f'{path.relative_to(ROOT)}: {file_name} "{quoted}"')
    assert checked >= 4, f"only {checked} quoted headings found: is the pattern still right?"
    assert not missing, "headings not found:\n" + "\n".join(missing)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_every_link_anchor_exists() -> None:
    """``[text](cluster.md#watching-it)`` points at a heading of that file."""
    md_files = _md_files()
    missing: list[str] = []
    checked = 0
    for path in _scanned():
        text = path.read_text(errors="replace")
        for name, anchor in re.findall(r"\]\(([\w./-]+\.md)#([\w-]+)\)", text):
            checked += 1
            target = _resolve(name, path, md_files)
            if target is None or anchor not in {_slug(h) for h in _headings(target)}:
                missing.append(f"{path.relative_to(ROOT)}: {name}#{anchor}")
    assert checked >= 2
    assert not missing, "\n".join(missing)


# ------------------------------------------------------------------------------ codes


def _section(doc: Path, title: str) -> str:
    """The text under the heading ``title`` up to the next heading of its level or above."""
    text = doc.read_text()
    m = re.search(rf"^(#+) {re.escape(title)}\s*$", text, re.M)
    assert m is not None, f"no heading {title!r} in {doc.name}"
    level = len(m.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, m.end())
    return text[m.end() : end.start() if end else len(text)]


def _documented_codes(section: str) -> dict[int, str]:
    """Code → name from the table rows ``| 10 | SEND_MESSAGE | …`` of a section."""
    return {int(c): n for c, n in re.findall(r"^\| (\d+) \| ([A-Z0-9_]+) \|", section, re.M)}


def test_broker_codes_documented(tmp_path: Path) -> None:
    """protocol.md §5 "Broker" lists exactly the codes a Broker's processor table serves."""
    b = Broker(BrokerConfig(store=StoreConfig(root_dir=tmp_path)))  # built, never started
    registered = {int(c): RequestCode(c).name for c in b.processors.codes}
    assert len(registered) > 40
    documented = _documented_codes(_section(PROTOCOL, "Broker"))
    assert documented == registered


def test_namesrv_codes_documented() -> None:
    """protocol.md §5 "Name server" lists exactly the codes a NameServer serves."""
    ns = NameServer(NamesrvConfig())  # built, never started; KV config in memory
    registered = {int(c): RequestCode(c).name for c in ns.processors.codes}
    assert len(registered) > 15
    documented = _documented_codes(_section(PROTOCOL, "Name server"))
    assert documented == registered


def test_every_header_class_documented() -> None:
    """Each typed header of remoting/headers.py is named in protocol.md."""
    text = PROTOCOL.read_text()
    classes = [
        name
        for name, value in vars(remoting.headers).items()
        if isinstance(value, type)
        and issubclass(value, remoting.headers.CommandHeader)
        and value is not remoting.headers.CommandHeader
    ]
    assert len(classes) > 30
    missing = [name for name in classes if f"`{name}`" not in text]
    assert not missing, f"header classes not in docs/protocol.md: {missing}"


# ------------------------------------------------------------------------------ sizes


def _table(section: str, index: int = 0) -> list[list[str]]:
    """The body rows of the ``index``-th Markdown table of a section, cells stripped."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in section.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if current is None:
                current = []
                tables.append(current)
                continue  # the header row
            if not all(set(c) <= set("-: ") for c in cells):
                current.append(cells)
        else:
            current = None
    return tables[index]


def _field_sizes(s: struct.Struct) -> list[int]:
    """The size of each field of a ``>``-format of single letters (``>qiq`` → 8, 4, 8)."""
    letters = re.findall(r"\d*[a-zA-Z]", s.format.lstrip("<>=!@"))
    return [struct.calcsize(">" + letter) for letter in letters if not letter.endswith("x")]


def _sizes_table(doc: Path) -> dict[str, int]:
    rows = _table(_section(doc, next(h for h in _headings(doc) if "Sizes the code asserts" in h)))
    return {row[0]: int(row[1].replace(",", "")) for row in rows}


def _empty_binary_header() -> int:
    return len(remoting.header_codec.encode_binary(HeaderFields(10, 0, 409, 1, 0, None, {})))


def test_protocol_sizes_match_the_code() -> None:
    ipv4 = host_of("127.0.0.1", 10911)
    ipv6 = host_of("::1", 10911)
    expected = {
        "frame prefix (length + type/header-length word)": remoting.frame._PREFIX.size,
        "ROCKETMQ binary header, fixed part with the extFields length": _empty_binary_header(),
        "batch entry, fixed part (TOTALSIZE .. BODYLEN)": codec.batch._BATCH_ENTRY.size,
        "offset message id, IPv4 store host": len(offset_msg_id(ipv4, 0)) // 2,
        "offset message id, IPv6 store host": len(offset_msg_id(ipv6, 0)) // 2,
        "UNIQ_KEY": len(UniqIdGenerator(bytes(4)).next_id()) // 2,
    }
    assert (
        len(remoting.frame.frame_prefix(0, 10, 5))
        == expected["frame prefix (length + type/header-length word)"]
    )
    assert _sizes_table(PROTOCOL) == expected


def test_store_sizes_match_the_code(tmp_path: Path) -> None:
    cp = store.checkpoint.Checkpoint(tmp_path / "checkpoint")
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 1, 2, 3
    cp.flush()
    cp.close()
    written = (tmp_path / "checkpoint").read_bytes()
    fields = store.checkpoint._FIELDS
    assert written[: fields.size] == struct.pack(">qqq", 1, 2, 3)
    defaults = StoreConfig()
    expected = {
        "commit-log record, fixed part (TOTALSIZE .. BODYLENGTH), IPv4 hosts": (
            codec.record.RECORD_HEADERS[4, 4].size
        ),
        "commit-log record, fixed part, IPv6 born and store hosts": (
            codec.record.RECORD_HEADERS[16, 16].size
        ),
        "commit-log record with empty body, topic and properties, IPv4 hosts": (
            codec.record.record_length(0, 0, 0)
        ),
        "record head (TOTALSIZE, MAGICCODE) = blank record": len(codec.record.encode_blank(8)),
        "consume-queue unit": store.consume_queue.UNIT_BYTES,
        "index file header": store.index_file.HEADER_BYTES,
        "index hash slot": store.index_file.SLOT_BYTES,
        "index entry": store.index_file.ENTRY_BYTES,
        "index file with default slots and entries": store.index_file.index_file_bytes(
            defaults.max_hash_slot_num, defaults.max_index_num
        ),
        "checkpoint file": len(written),
        "checkpoint fields": fields.size,
        "batch entry, fixed part": codec.batch._BATCH_ENTRY.size,
        "HA transfer header": store.ha._HEADER.size,
        "HA offset report": store.ha._OFFSET.size,
        "timer log entry": broker.timer.ENTRY_BYTES,
    }
    assert _sizes_table(STORE_FORMAT) == expected
    # the same sizes where a second module packs the same layout
    assert codec.record.RECORD_HEAD.size == store.commit_log.END_FILE_MIN_BLANK_BYTES
    assert codec.units.CQ_UNIT_BYTES == store.consume_queue.UNIT_BYTES
    assert codec.units.INDEX_HEADER_BYTES == store.index_file.HEADER_BYTES
    assert codec.units.INDEX_SLOT_BYTES == store.index_file.SLOT_BYTES
    assert codec.units.INDEX_ENTRY_BYTES == store.index_file.ENTRY_BYTES
    assert len(written) == store.checkpoint.CHECKPOINT_BYTES


def _offset_table(rows: list[list[str]], offset_col: int, size_col: int) -> list[tuple[int, int]]:
    return [(int(r[offset_col]), int(r[size_col])) for r in rows]


def _assert_packed(pairs: list[tuple[int, int]], total: int) -> None:
    """Rows (offset, size) follow each other without gap and end at ``total``."""
    position = 0
    for offset, size in pairs:
        assert offset == position, f"a field at {offset}, expected at {position}"
        position += size
    assert position == total


def test_record_table_matches_the_code() -> None:
    """store-format.md §2.2: each fixed field where ``codec.record`` packs it."""
    rows = _table(_section(STORE_FORMAT, "2.2 Record layout (MESSAGE_MAGIC_CODE, version 1)"))
    fixed = [r for r in rows if r[1].isdigit()]
    by_field = {r[3]: int(r[1]) for r in fixed}
    header = codec.record.RECORD_HEADERS[4, 4]
    # every field up to BODYLENGTH, then BODY right after the fixed part
    _assert_packed(_offset_table(fixed[:15], 1, 2), header.size)
    assert by_field["BODY"] == header.size
    assert {
        "TOTALSIZE": codec.record.POS_TOTAL_SIZE,
        "MAGICCODE": codec.record.POS_MAGIC,
        "BODYCRC": codec.record.POS_BODY_CRC,
        "QUEUEID": codec.record.POS_QUEUE_ID,
        "FLAG": codec.record.POS_FLAG,
        "QUEUEOFFSET": codec.record.POS_QUEUE_OFFSET,
        "PHYSICALOFFSET": codec.record.POS_PHYSICAL_OFFSET,
        "SYSFLAG": codec.record.POS_SYS_FLAG,
        "BORNTIMESTAMP": codec.record.POS_BORN_TIMESTAMP,
        "BORNHOST": codec.record.POS_BORN_HOST,
        "STORETIMESTAMP": codec.record.store_timestamp_pos(0),
    }.items() <= by_field.items()
    # TOPICLENGTH, TOPIC, PROPERTIESLENGTH: 1 + t + 2 after the body, so 91 + n + t + p
    assert codec.record.record_length(5, 7, 11) == header.size + 5 + 1 + 7 + 2 + 11
    assert "TOTALSIZE = 91 + n + t + p" in STORE_FORMAT.read_text()


@pytest.mark.parametrize(
    ("title", "index", "packer"),
    [
        ("3. Consume queue", 0, store.consume_queue._UNIT),
        ("3. Consume queue", 0, codec.units._CQ_UNIT),
        ("4. Index file", 0, store.index_file._HEADER),
        ("4. Index file", 1, store.index_file._ENTRY),
        ("4. Index file", 1, codec.units._INDEX_ENTRY),
        ("5. Checkpoint, abort, lock", 0, store.checkpoint._FIELDS),
        ("14. Timer log and pop revive records (RocketMQ 5 features)", 0, broker.timer._ENTRY),
    ],
)
def test_layout_table_matches_its_struct(title: str, index: int, packer: struct.Struct) -> None:
    """A layout table's offsets and sizes are the fields of the struct that packs it."""
    rows = _table(_section(STORE_FORMAT, title), index)
    pairs = _offset_table(rows, 0, 1)
    assert [size for _offset, size in pairs] == _field_sizes(packer)
    _assert_packed(pairs, packer.size)
