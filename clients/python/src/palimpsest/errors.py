"""PalimpsestError: a failed RPC with its ``google.rpc.Status`` details decoded.

The server sends a ``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer. Decoding it
usually takes ``grpcio-status`` and ``googleapis-common-protos``; here the five messages involved
(Status, Any, ErrorInfo, BadRequest, PreconditionFailure, QuotaFailure) are described once in a
private descriptor pool, so protobuf's own parser reads them and nothing named ``google.rpc`` is
registered globally (no clash when googleapis-common-protos is installed too).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool

try:  # protobuf >= 4.21
    from google.protobuf.message_factory import GetMessageClass as _message_class
except ImportError:  # pragma: no cover - protobuf 3.x
    from google.protobuf import message_factory as _mf

    _factory = _mf.MessageFactory()

    def _message_class(descriptor: Any) -> Any:
        return _factory.GetPrototype(descriptor)


_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="palimpsest/_rpc_status.proto", package="palimpsest_private.rpc", syntax="proto3")

    def message(name: str, *fields: tuple) -> descriptor_pb2.DescriptorProto:
        m = fd.message_type.add(name=name)
        for number, (fname, ftype, label, type_name) in enumerate(fields, start=1):
            f = m.field.add(name=fname, number=number, type=ftype, label=label, json_name=fname)
            if type_name:
                f.type_name = type_name
        return m

    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    s, i32, b, msg = _F.TYPE_STRING, _F.TYPE_INT32, _F.TYPE_BYTES, _F.TYPE_MESSAGE
    p = ".palimpsest_private.rpc."
    message("Any", ("type_url", s, opt, None), ("value", b, opt, None))
    message("Status", ("code", i32, opt, None), ("message", s, opt, None), ("details", msg, rep, p + "Any"))
    info = message("ErrorInfo", ("reason", s, opt, None), ("domain", s, opt, None), ("metadata", msg, rep, p + "ErrorInfo.MetadataEntry"))
    entry = info.nested_type.add(name="MetadataEntry")
    entry.field.add(name="key", number=1, type=s, label=opt, json_name="key")
    entry.field.add(name="value", number=2, type=s, label=opt, json_name="value")
    entry.options.map_entry = True
    message("FieldViolation", ("field", s, opt, None), ("description", s, opt, None))
    message("BadRequest", ("field_violations", msg, rep, p + "FieldViolation"))
    message("PreconditionViolation", ("type", s, opt, None), ("subject", s, opt, None), ("description", s, opt, None))
    message("PreconditionFailure", ("violations", msg, rep, p + "PreconditionViolation"))
    message("QuotaViolation", ("subject", s, opt, None), ("description", s, opt, None))
    message("QuotaFailure", ("violations", msg, rep, p + "QuotaViolation"))
    return fd


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_file())
_cls = {name: _message_class(_pool.FindMessageTypeByName(f"palimpsest_private.rpc.{name}"))
        for name in ("Status", "ErrorInfo", "BadRequest", "PreconditionFailure", "QuotaFailure")}

DETAILS_KEY = "grpc-status-details-bin"


@dataclass
class Violation:
    """One entry of a BadRequest (field, description), PreconditionFailure (type, subject,
    description) or QuotaFailure (subject, description)."""

    kind: str  # "field" | "precondition" | "quota"
    description: str
    field: str = ""
    type: str = ""
    subject: str = ""


@dataclass
class Details:
    """The decoded ``google.rpc.Status`` of a failure."""

    message: str = ""
    reason: str = ""
    domain: str = ""
    metadata: Dict[str, str] = field(default_factory=dict)
    violations: List[Violation] = field(default_factory=list)


def decode_status(raw: bytes) -> Details:
    """Decodes a serialized ``google.rpc.Status`` (the ``grpc-status-details-bin`` value)."""
    status = _cls["Status"].FromString(raw)
    out = Details(message=status.message)
    for any_ in status.details:
        name = any_.type_url.rsplit("/", 1)[-1]
        if name == "google.rpc.ErrorInfo":
            info = _cls["ErrorInfo"].FromString(any_.value)
            out.reason, out.domain, out.metadata = info.reason, info.domain, dict(info.metadata)
        elif name == "google.rpc.BadRequest":
            out.violations += [Violation("field", v.description, field=v.field)
                               for v in _cls["BadRequest"].FromString(any_.value).field_violations]
        elif name == "google.rpc.PreconditionFailure":
            out.violations += [Violation("precondition", v.description, type=v.type, subject=v.subject)
                               for v in _cls["PreconditionFailure"].FromString(any_.value).violations]
        elif name == "google.rpc.QuotaFailure":
            out.violations += [Violation("quota", v.description, subject=v.subject)
                               for v in _cls["QuotaFailure"].FromString(any_.value).violations]
    return out


class PalimpsestError(Exception):
    """A failed call: ``code`` is the gRPC status name (``"FAILED_PRECONDITION"``), ``reason`` the
    rule ID or documented reason (``"HEAD_MISMATCH"``), ``metadata`` the ErrorInfo metadata
    (``metadata["index"]`` names the failing event of a rejected batch) and ``violations`` the
    BadRequest / PreconditionFailure / QuotaFailure entries."""

    def __init__(self, code: str, message: str, details: Optional[Details] = None,
                 status_code: Optional[grpc.StatusCode] = None):
        d = details or Details()
        self.code: str = code
        self.status_code: Optional[grpc.StatusCode] = status_code
        self.message: str = d.message or message
        self.reason: str = d.reason
        self.domain: str = d.domain
        self.metadata: Dict[str, str] = d.metadata
        self.violations: List[Violation] = d.violations
        super().__init__(f"{code} {self.reason}: {self.message}" if self.reason else f"{code}: {self.message}")

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError) -> "PalimpsestError":
        """Decodes a ``grpc.RpcError`` (a failed call or stream)."""
        call: Any = err
        code: grpc.StatusCode = call.code() if hasattr(call, "code") else grpc.StatusCode.UNKNOWN
        message = (call.details() if hasattr(call, "details") else None) or str(err)
        details = None
        trailers = call.trailing_metadata() if hasattr(call, "trailing_metadata") else None
        for key, value in trailers or ():
            if key == DETAILS_KEY and isinstance(value, bytes):
                details = decode_status(value)
        return cls(code.name, message, details, code)

    def as_dict(self) -> Dict[str, Any]:
        """The shape the CLI prints with --json: code, reason, message, metadata (+ violations)."""
        return {"code": self.code, "reason": self.reason, "message": self.message, "metadata": dict(self.metadata),
                "violations": [v.__dict__ for v in self.violations]}
