"""OTLP JSON trace exports, read as a stream of spans.

Two shapes, one reader: the OpenTelemetry Collector's `file` exporter writes one
`ExportTraceServiceRequest` per line (JSON; `.gz` or gzip bytes read as gzip), and an
OTLP/HTTP JSON body is one such request, possibly over many lines. OTLP JSON is protobuf's
JSON mapping with two differences the spec names: trace and span ids are hex (not base64),
and enums are integers. Field names are taken from `opentelemetry-proto`'s descriptors
(lowerCamelCase as written; the proto's own snake_case accepted too).

Damage is refused with the file and line, before any engine starts: bytes that are not
JSON text (a protobuf export), a JSON file that is not a trace export, a line that is not
JSON or not UTF-8. A last line without its newline that does not parse is an export still
being written: it is left out and counted (`Reading.torn`), and a later import reads it
whole. Spans are streamed: memory holds one line's request at a time.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from google.protobuf.descriptor import Descriptor
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from auditor.errors import BadInput
from auditor.traces.conventions import (
    CONTENT_EVENTS,
    INTERESTING,
    INTERESTING_PREFIXES,
    SERVICE_NAME,
    SpanFacts,
    read_span,
)

__all__ = ["CONTENT_LIMIT", "Reading", "read_export"]

# one attribute's text past this is not kept (a trace holding one is skipped, counted)
CONTENT_LIMIT = 1 << 20
# an OTLP/HTTP JSON body spread over lines is read whole: at most this many bytes
BODY_LIMIT = 256 << 20
FIX_EXPORT = (
    "export traces as OTLP JSON (the collector's file exporter, format: json; or an "
    "OTLP/HTTP JSON body)"
)


def _names(descriptor: Descriptor, field_name: str) -> tuple[str, ...]:
    """A field's JSON name and its proto name (a JSON reader accepts both)."""
    found = descriptor.fields_by_name[field_name]
    return (found.json_name, found.name) if found.json_name != found.name else (found.name,)


_REQUEST = trace_service_pb2.ExportTraceServiceRequest.DESCRIPTOR
_RESOURCE_SPANS = trace_pb2.ResourceSpans.DESCRIPTOR
_SCOPE_SPANS = trace_pb2.ScopeSpans.DESCRIPTOR
_SPAN = trace_pb2.Span.DESCRIPTOR
_EVENT = trace_pb2.Span.Event.DESCRIPTOR
_STATUS = trace_pb2.Status.DESCRIPTOR
_KEY_VALUE = common_pb2.KeyValue.DESCRIPTOR
_ANY_VALUE = common_pb2.AnyValue.DESCRIPTOR

RESOURCE_SPANS = _names(_REQUEST, "resource_spans")
RESOURCE = _names(_RESOURCE_SPANS, "resource")
RESOURCE_ATTRIBUTES = _names(resource_pb2.Resource.DESCRIPTOR, "attributes")
SCOPE_SPANS = _names(_RESOURCE_SPANS, "scope_spans")
SPANS = _names(_SCOPE_SPANS, "spans")
TRACE_ID = _names(_SPAN, "trace_id")
SPAN_ID = _names(_SPAN, "span_id")
PARENT_SPAN_ID = _names(_SPAN, "parent_span_id")
NAME = _names(_SPAN, "name")
START = _names(_SPAN, "start_time_unix_nano")
END = _names(_SPAN, "end_time_unix_nano")
ATTRIBUTES = _names(_SPAN, "attributes")
EVENTS = _names(_SPAN, "events")
EVENT_NAME = _names(_EVENT, "name")
EVENT_ATTRIBUTES = _names(_EVENT, "attributes")
STATUS = _names(_SPAN, "status")
STATUS_CODE = _names(_STATUS, "code")
STATUS_MESSAGE = _names(_STATUS, "message")
KEY = _names(_KEY_VALUE, "key")
VALUE = _names(_KEY_VALUE, "value")
STRING_VALUE = _names(_ANY_VALUE, "string_value")
BOOL_VALUE = _names(_ANY_VALUE, "bool_value")
INT_VALUE = _names(_ANY_VALUE, "int_value")
DOUBLE_VALUE = _names(_ANY_VALUE, "double_value")
ARRAY_VALUE = _names(_ANY_VALUE, "array_value")
KVLIST_VALUE = _names(_ANY_VALUE, "kvlist_value")
BYTES_VALUE = _names(_ANY_VALUE, "bytes_value")
VALUES = _names(common_pb2.ArrayValue.DESCRIPTOR, "values")
STATUS_ERROR = trace_pb2.Status.STATUS_CODE_ERROR
STATUS_ERROR_NAME = trace_pb2.Status.StatusCode.Name(STATUS_ERROR)
# the signals a file of another kind holds (ExportLogsServiceRequest, ...Metrics...)
OTHER_SIGNALS = {
    "resourceLogs": "logs",
    "resource_logs": "logs",
    "resourceMetrics": "metrics",
    "resource_metrics": "metrics",
    "resourceProfiles": "profiles",
}


def _get(data: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in data:
            return data[name]
    return None


@dataclass
class Reading:
    """What reading one export found besides its spans: lines, bytes, the torn last line,
    spans whose ids are not OTLP's."""

    path: Path
    lines: int = 0
    bytes_read: int = 0
    torn: str | None = None  # "file:line" of a last line still being written
    bad_ids: int = 0
    services: set[str] = field(default_factory=set)


def read_export(path: Path, reading: Reading | None = None) -> Iterator[tuple[str, SpanFacts]]:
    """Every span of an export with where it was read ("file:line"), in file order."""
    reading = reading if reading is not None else Reading(path)
    for where, request in _requests(path, reading):
        resource_spans = _get(request, RESOURCE_SPANS)
        if not isinstance(resource_spans, list):
            raise BadInput(f"{where}: not an OTLP trace export request (no resourceSpans list)")
        for resource_span in resource_spans:
            if not isinstance(resource_span, dict):
                raise BadInput(f"{where}: a resourceSpans entry must be an object; {FIX_EXPORT}")
            service = _service(resource_span)
            reading.services.add(service)
            for scope in _get(resource_span, SCOPE_SPANS) or _instrumentation_library(
                resource_span
            ):
                if not isinstance(scope, dict):
                    continue
                for span in _get(scope, SPANS) or []:
                    if not isinstance(span, dict):
                        continue
                    facts = _span(span, service)
                    if facts is None:
                        reading.bad_ids += 1
                        continue
                    yield where, facts


def _instrumentation_library(resource_span: dict[str, Any]) -> list[Any]:
    """OTLP before 0.15 called scope spans instrumentationLibrarySpans."""
    value = resource_span.get("instrumentationLibrarySpans")
    return value if isinstance(value, list) else []


def _requests(path: Path, reading: Reading) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each ExportTraceServiceRequest of the file, with its "file:line"."""
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the trace export ({exc.strerror})") from exc
    with raw:
        head = raw.read(2)
        raw.seek(0)
        stream: gzip.GzipFile | io.BufferedReader = (
            gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw
        )
        try:
            _refuse_binary(path, stream.peek(4096)[:4096])
            yield from _lines(path, stream, reading)
        except (OSError, EOFError) as exc:  # gzip damage: a cut .gz or other bytes
            raise BadInput(
                f"{path}: the gzip stream is damaged ({exc}); copy the export again"
            ) from exc


def _lines(
    path: Path, stream: gzip.GzipFile | io.BufferedReader, reading: Reading
) -> Iterator[tuple[str, dict[str, Any]]]:
    number = 0
    pending: tuple[int, bytes] | None = None  # the line read last, parsed once the next is read
    for number, line in enumerate(stream, start=1):
        reading.lines = number
        reading.bytes_read += len(line)
        if pending is not None:
            yield _parsed(path, *pending, last=False)
        pending = (number, line) if line.strip() else None
        if number == 1 and pending is not None and not _parses(line):
            # one OTLP/HTTP JSON body over many lines, or line 1 damaged (or torn, alone)
            yield from _first_body(path, stream, line, reading)
            return
    if pending is not None:
        parsed = _parsed(path, *pending, last=True)
        if parsed[1]:
            yield parsed
        else:
            reading.torn = parsed[0]
    if number == 0:
        raise BadInput(f"{path}: empty; {FIX_EXPORT}")


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _first_body(
    path: Path, stream: gzip.GzipFile | io.BufferedReader, first: bytes, reading: Reading
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The file whose first line is not JSON alone: one JSON body over many lines (a
    pretty-printed OTLP/HTTP body, read whole up to BODY_LIMIT), else a damaged first line
    (refused) or a lone line still being written (torn)."""
    rest = stream.read(BODY_LIMIT + 1)
    reading.bytes_read += len(rest)
    reading.lines += rest.count(b"\n") + (0 if rest.endswith(b"\n") or not rest else 1)
    body: Any = None
    if rest and first.lstrip().startswith(b"{") and len(first) + len(rest) <= BODY_LIMIT:
        try:
            body = orjson.loads(first + rest)
        except orjson.JSONDecodeError:
            body = None
    if isinstance(body, dict):
        _refuse_other_signal(f"{path}:1", body)
        yield f"{path}:1", body
        return
    where, data = _parsed(path, 1, first, last=not rest)
    if data:  # cannot be: line 1 did not parse
        yield where, data
    else:
        reading.torn = where


def _parsed(path: Path, number: int, line: bytes, last: bool) -> tuple[str, dict[str, Any]]:
    """A line's request; ({where}, {}) for a torn last line (no newline, not JSON)."""
    where = f"{path}:{number}"
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if last and not line.endswith(b"\n"):
            return where, {}
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(
                f"{where}: not UTF-8 text (damaged bytes); copy the export again, or cut the "
                "line out"
            ) from exc
        raise BadInput(
            f"{where}: not a JSON object ({exc.msg}): a line cut or damaged; copy the export "
            "again, or cut the line out"
        ) from exc
    if not isinstance(data, dict):
        raise BadInput(f"{where}: a line must be one JSON object (an ExportTraceServiceRequest)")
    _refuse_other_signal(where, data)
    if _get(data, RESOURCE_SPANS) is None:
        raise BadInput(
            f"{where}: a JSON object without resourceSpans: not an OTLP trace export; {FIX_EXPORT}"
        )
    return where, data


def _refuse_other_signal(where: str, data: dict[str, Any]) -> None:
    for key, signal in OTHER_SIGNALS.items():
        if key in data:
            raise BadInput(f"{where}: an OTLP {signal} export, not traces; {FIX_EXPORT}")


def _refuse_binary(path: Path, head: bytes) -> None:
    """Refuse bytes that are not JSON text: a NUL, or a first character other than { or [."""
    start = head.lstrip()[:1]
    if b"\0" in head or (start and start not in (b"{", b"[")):
        raise BadInput(f"{path}: not JSON text (binary: an OTLP protobuf export?); {FIX_EXPORT}")


def _service(resource_span: dict[str, Any]) -> str:
    resource = _get(resource_span, RESOURCE)
    attributes = _get(resource, RESOURCE_ATTRIBUTES) if isinstance(resource, dict) else None
    for key, value in _pairs(attributes):
        if key == SERVICE_NAME and isinstance(value, dict):
            name = _value(value)
            if isinstance(name, str):
                return name
    return "unknown_service"


def _pairs(attributes: Any) -> Iterator[tuple[str, Any]]:
    if not isinstance(attributes, list):
        return
    for item in attributes:
        if isinstance(item, dict):
            key = _get(item, KEY)
            if isinstance(key, str):
                yield key, _get(item, VALUE)


def _span(span: dict[str, Any], service: str) -> SpanFacts | None:
    """The span's facts; None when its trace or span id is not OTLP's."""
    trace_id = _hex_id(_get(span, TRACE_ID), 16)
    span_id = _hex_id(_get(span, SPAN_ID), 8)
    if trace_id is None or span_id is None:
        return None
    parent = _hex_id(_get(span, PARENT_SPAN_ID), 8) or ""
    attributes: dict[str, Any] = {}
    oversized = None
    for key, value in _pairs(_get(span, ATTRIBUTES)):
        if key in INTERESTING or key.startswith(INTERESTING_PREFIXES):
            decoded = _value(value) if isinstance(value, dict) else None
            if isinstance(decoded, str) and _over_limit(decoded):
                oversized = key
                continue
            attributes[key] = decoded
    events = []
    for event in _get(span, EVENTS) or []:
        if isinstance(event, dict) and _get(event, EVENT_NAME) in CONTENT_EVENTS:
            values = {k: _value(v) for k, v in _pairs(_get(event, EVENT_ATTRIBUTES))}
            events.append((str(_get(event, EVENT_NAME)), values))
    facts = read_span(
        trace_id,
        span_id,
        parent,
        str(_get(span, NAME) or ""),
        service,
        _nanos(_get(span, START)),
        _nanos(_get(span, END)),
        _error(_get(span, STATUS)),
        attributes,
        events,
    )
    facts.oversized = oversized
    return facts


def _over_limit(text: str) -> bool:
    """Whether a text is over CONTENT_LIMIT bytes of UTF-8 (encoded only when it may be)."""
    return (
        len(text) > CONTENT_LIMIT // 4
        and len(text.encode("utf-8", "surrogatepass")) > CONTENT_LIMIT
    )


def _error(status: Any) -> str | None:
    """The status message of an ERROR status ("error" when it has none); None otherwise."""
    if not isinstance(status, dict):
        return None
    code = _get(status, STATUS_CODE)
    if code in (STATUS_ERROR, STATUS_ERROR_NAME, str(STATUS_ERROR)):
        message = _get(status, STATUS_MESSAGE)
        return message if isinstance(message, str) and message else "error"
    return None


def _hex_id(value: Any, size: int) -> str | None:
    """An id as lowercase hex of `size` bytes: OTLP JSON writes hex; protobuf's own JSON
    mapping (some exporters) writes base64, read too. None when neither, or all zero."""
    if not isinstance(value, str) or not value:
        return None
    text = value.lower()
    if len(text) == 2 * size and all(c in "0123456789abcdef" for c in text):
        return None if text.strip("0") == "" else text
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != size or not any(raw):
        return None
    return raw.hex()


def _nanos(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 24:
        return int(value)
    return 0


# nesting of array / kvlist values read (a hostile export nests thousands deep)
MAX_DEPTH = 16


def _value(value: dict[str, Any], depth: int = 0) -> Any:
    """An AnyValue as Python: str, bool, int, float, list or dict (bytes as base64 text);
    None past MAX_DEPTH levels of nesting."""
    if depth > MAX_DEPTH:
        return None
    for names, convert in _ANY:
        found = _get(value, names)
        if found is not None:
            return convert(found, depth)
    return None


def _int(found: Any, depth: int = 0) -> int | None:
    if isinstance(found, str) and len(found) > 24:  # int64 is 20 digits at most
        return None
    try:
        return int(found)
    except (TypeError, ValueError):
        return None


def _float(found: Any, depth: int = 0) -> float | None:
    try:
        number = float(found)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _array(found: Any, depth: int = 0) -> list[Any]:
    values = _get(found, VALUES) if isinstance(found, dict) else None
    if not isinstance(values, list):
        return []
    return [_value(v, depth + 1) for v in values if isinstance(v, dict)]


def _kvlist(found: Any, depth: int = 0) -> dict[str, Any]:
    values = _get(found, VALUES) if isinstance(found, dict) else None
    return {k: _value(v, depth + 1) for k, v in _pairs(values) if isinstance(v, dict)}


def _text(found: Any, depth: int = 0) -> str | None:
    return found if isinstance(found, str) else None


def _flag(found: Any, depth: int = 0) -> bool | None:
    return found if isinstance(found, bool) else None


_ANY: tuple[tuple[tuple[str, ...], Any], ...] = (
    (STRING_VALUE, _text),
    (INT_VALUE, _int),
    (DOUBLE_VALUE, _float),
    (BOOL_VALUE, _flag),
    (ARRAY_VALUE, _array),
    (KVLIST_VALUE, _kvlist),
    (BYTES_VALUE, _text),
)
