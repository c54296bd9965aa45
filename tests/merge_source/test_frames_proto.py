"""The committed merge_source/frames_pb2.py is what protoc makes of frames.proto (the contract):
whoever edits the .proto runs `make frames`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from merge_source import frames_pb2

ROOT = Path(__file__).resolve().parents[2]


def test_frames_pb2_matches_frames_proto(tmp_path):
    pytest.importorskip("grpc_tools", reason="protoc comes with the test extra's grpcio-tools")
    out = tmp_path / "frames.desc"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", f"--descriptor_set_out={out}"]
        + ["merge_source/frames.proto"],
        cwd=ROOT,
        check=True,
    )
    want = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in want.message_type:  # a descriptor set names each field's JSON form too
        for field in message.field:
            field.ClearField("json_name")
    have = descriptor_pb2.FileDescriptorProto.FromString(frames_pb2.DESCRIPTOR.serialized_pb)
    assert have == want, "merge_source/frames_pb2.py is stale: run `make frames`"
