"""The statuses each gRPC call may return, read from the "Errors:" lists of the .proto comments
(the document is their one owner): the fuzz tests hold the servers to them."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import grpc

PROTO = Path(__file__).resolve().parents[1] / "proto" / "rtplan" / "v1"
#: A list's head ("Errors:", "Stream errors:") and its items ("  CODE: when").
_HEAD = re.compile(r"^\s*//\s*(Errors|Stream errors):\s*(none\.)?\s*$")
_ITEM = re.compile(r"^\s*//\s{3}([A-Z_]+):")
_RPC = re.compile(r"^\s*rpc\s+(\w+)\s*\(")
_SERVICE = re.compile(r"^\s*service\s+(\w+)\s*\{")


@functools.cache
def _lists() -> dict[tuple[str, str, str], frozenset[grpc.StatusCode]]:
    """(service, rpc, "Errors" | "Stream errors") -> the codes listed in the rpc's comment."""
    out: dict[tuple[str, str, str], frozenset[grpc.StatusCode]] = {}
    for path in sorted(PROTO.glob("*.proto")):
        service, pending, head = None, {}, None
        for line in path.read_text().splitlines():
            if m := _SERVICE.match(line):
                service, pending, head = m.group(1), {}, None
            elif service is None:
                continue
            elif m := _HEAD.match(line):
                head = m.group(1)
                pending.setdefault(head, set())
            elif head is not None and (m := _ITEM.match(line)):
                pending[head].add(grpc.StatusCode[m.group(1)])
            elif m := _RPC.match(line):
                for kind, codes in pending.items():
                    out[(service, m.group(1), kind)] = frozenset(codes)
                pending, head = {}, None
            elif not line.strip().startswith("//"):
                pending, head = {}, None
    return out


def rpcs() -> set[tuple[str, str]]:
    """(service, rpc) of every rpc the .proto files define."""
    out, service = set(), None
    for path in sorted(PROTO.glob("*.proto")):
        for line in path.read_text().splitlines():
            if m := _SERVICE.match(line):
                service = m.group(1)
            elif m := _RPC.match(line):
                out.add((service, m.group(1)))
    return out


def declared(service: str, rpc: str, *, stream: bool = False) -> frozenset[grpc.StatusCode]:
    """The statuses `service.rpc` may end with (OK included), or with `stream` the codes its
    stream's error messages may carry, as its .proto comment lists them."""
    kind = "Stream errors" if stream else "Errors"
    key = (service, rpc, kind)
    assert key in _lists(), f"{service}.{rpc} has no {kind!r} list in {PROTO}"
    return _lists()[key] | (frozenset() if stream else {grpc.StatusCode.OK})


def declared_numbers(service: str, rpc: str) -> frozenset[int]:
    """`declared(..., stream=True)` as google.rpc.Code numbers (a `Status.code`)."""
    return frozenset(c.value[0] for c in declared(service, rpc, stream=True))
