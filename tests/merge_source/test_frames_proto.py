"""The committed frames_pb2.py of each stage contract (merge_source: MergeSource → MergeJoint;
dumper/streams: splitter → stream writer) is what protoc makes of its frames.proto: whoever
edits a .proto runs `make frames`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from dumper.streams import frames_pb2 as stream_frames_pb2
from merge_source import frames_pb2

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("proto", "module"),
    [("merge_source/frames.proto", frames_pb2), ("dumper/streams/frames.proto", stream_frames_pb2)],
)
def test_frames_pb2_matches_frames_proto(tmp_path, proto, module):
    pytest.importorskip("grpc_tools", reason="protoc comes with the test extra's grpcio-tools")
    out = tmp_path / "frames.desc"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", f"--descriptor_set_out={out}"] + [proto],
        cwd=ROOT,
        check=True,
    )
    want = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in want.message_type:  # a descriptor set names each field's JSON form too
        for field in message.field:
            field.ClearField("json_name")
    have = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    assert have == want, f"{proto}'s frames_pb2.py is stale: run `make frames`"
