"""The checked-in protocol stubs are what proto/generate.py makes from the .proto files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rtplan import wire
from rtplan.v1 import env_pb2, planner_pb2

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stubs_are_in_sync_with_the_proto_files(tmp_path):
    written = _generator().generate(tmp_path)
    assert written, "the generator wrote nothing"
    checked_in = ROOT / "rtplan" / "v1"
    names = sorted(p.name for p in written)
    assert names == sorted(p.name for p in checked_in.iterdir() if p.suffix in (".py", ".pyi"))
    for path in written:
        stale = (checked_in / path.name).read_text() != path.read_text()
        assert not stale, f"rtplan/v1/{path.name} is stale: run `python proto/generate.py`"


def test_protocol_version_and_reserved_extension_slots():
    assert wire.PROTOCOL_VERSION == "rtplan.v1"
    for message in (env_pb2.AgentMessage, env_pb2.ServerMessage, planner_pb2.PlanRequest):
        assert "extension" in message.DESCRIPTOR.fields_by_name
