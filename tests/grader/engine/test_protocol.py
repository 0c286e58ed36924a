"""The wire between orchestrator and worker: frames, payload archives, and one model per message.

Honest replies are the ones the worker's own code builds; each goes through a real pipe and is
read back by `read_reply` as the sandbox reads it. Forged ones are refused with a message that
names what was wrong.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.engine import protocol
from grader.engine.harness import serve as worker
from grader.engine.harness.timed_rounds import FreshRounds
from grader.engine.problems import REGISTRY

GELU = REGISTRY["gelu"]
CASE = GELU.case_model.model_validate({"name": "t", "suite": "cpu", "shape": [8, 16], "dtype": "float32"})
CALL = protocol.CallRequest(case=CASE.model_dump(), profile=True)
SHAPE = {"case": CASE.model_dump(), "seed": 7, "sets": 2, "refill_seed": 11, "verify_seed": 13}
TIME = protocol.TimeRequest(**SHAPE, budget_s=0.25, min_s=0.05, warm=True, profile=True)
LOOP = protocol.LoopRequest(**SHAPE, rounds=20)
WARM = protocol.WarmRequest(**SHAPE)


def through_pipe(
    message: protocol.Message, blob: bytes, expected: dict[str, type[protocol.Message]]
) -> tuple[protocol.Message, bytes]:
    """Send `message` as the worker does and read it back as the sandbox does."""
    read, write = os.pipe()
    try:
        protocol.send(write, message, blob)
        return protocol.read_reply(read, time.monotonic() + 10, 1 << 26, expected)
    finally:
        os.close(read)
        os.close(write)


def refused(header: dict[str, Any], expected: dict[str, type[protocol.Message]]) -> str:
    """The ProtocolError's message for a forged reply header."""
    with pytest.raises(protocol.ProtocolError) as caught:
        protocol.parse_reply(header, expected)
    return str(caught.value)


# -- honest replies parse ----------------------------------------------------------------------------


def test_the_greetings_the_worker_sends_parse() -> None:
    assert isinstance(through_pipe(protocol.Ready(), b"", protocol.GREETING)[0], protocol.Ready)
    failed = worker.describe_exception(ImportError("no module named numpy"), Path("/nowhere"))
    greeting, _ = through_pipe(protocol.ImportFailed(**failed.model_dump(exclude={"status"})), b"", protocol.GREETING)
    assert isinstance(greeting, protocol.ImportFailed) and "no module named numpy" in greeting.message


def test_an_honest_call_reply_parses_with_its_payload() -> None:
    inputs = GELU.make_inputs(CASE, torch.Generator().manual_seed(3))
    reply, blob = worker.handle_call(
        "gelu",
        lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
        CALL,
        protocol.pack_tensors(inputs),
        "cpu",
        Path("/nowhere"),
    )
    parsed, payload = through_pipe(reply, blob, CALL.replies)
    assert parsed == reply and isinstance(parsed, protocol.Called)
    assert parsed.profile is not None and "aten::gelu" in parsed.profile.aten_ops
    assert torch.equal(
        protocol.unpack_tensors(payload)["out"], torch.nn.functional.gelu(inputs["x"], approximate="tanh")
    )


def test_an_honest_error_reply_parses() -> None:
    def broken(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("block size too large")

    inputs = GELU.make_inputs(CASE, torch.Generator().manual_seed(3))
    here = Path(__file__).parent  # the "submission" whose frames the traceback keeps
    reply, blob = worker.handle_call("gelu", broken, CALL, protocol.pack_tensors(inputs), "cpu", here)
    parsed, _ = through_pipe(reply, blob, CALL.replies)
    assert (
        isinstance(parsed, protocol.Failed) and parsed.type == "ValueError" and "block size too large" in parsed.message
    )
    assert "raise ValueError" in parsed.traceback and not parsed.fatal
    # the error's line is the message, printed first: the traceback is the frames, not the line again
    assert "ValueError: block size too large" not in parsed.traceback


def test_honest_timing_replies_parse() -> None:
    """The checked rounds as `FreshRounds` drains them (the timing loop itself needs a GPU)."""
    sets = [GELU.make_inputs(CASE, torch.Generator().manual_seed(i)) for i in range(2)]
    rounds = FreshRounds(GELU, CASE, sets, 11, 13)
    for index in range(3):
        rounds.before(index % 2)
        rounds.after(GELU.timed(lambda x: x * 2, sets[index % 2])(), chunk_end=index == 2)
    verified, samples = rounds.drain()
    timed = protocol.Timed(
        samples_s=[1e-3, 2e-3, 3e-3],
        triton_launches=3,
        profile=protocol.Profile(aten_ops=[], triton_launches=1),
        verified=verified,
    )
    parsed, payload = through_pipe(timed, protocol.pack_tensors(samples), TIME.replies)
    assert parsed == timed and isinstance(parsed, protocol.Timed) and parsed.verified[-1].round == 2
    assert protocol.unpack_tensors(payload).keys() == samples.keys()
    looped = protocol.Looped(wall_s=0.01, triton_launches=20)
    assert through_pipe(looped, b"", LOOP.replies)[0] == looped
    warmed = protocol.Warmed(call_s=0.4)
    assert through_pipe(warmed, b"", WARM.replies)[0] == warmed


def test_requests_parse_back_to_themselves() -> None:
    for request in (CALL, TIME, WARM, LOOP, protocol.ExitRequest()):
        header = json.loads(json.dumps(request.model_dump(exclude_none=True)))
        assert protocol.parse_request(header) == request


def test_unverified_timing_leaves_the_seeds_off_the_wire() -> None:
    """GRADER_UNVERIFIED_TIMING: the request carries no round seeds, as before the models."""
    read, write = os.pipe()
    protocol.send(write, protocol.TimeRequest(case=CASE.model_dump(), seed=1, sets=2, budget_s=0.25))
    os.close(write)
    header, _ = protocol.recv(read)
    os.close(read)
    assert "refill_seed" not in header and "verify_seed" not in header
    request = protocol.parse_request(header)
    assert isinstance(request, protocol.TimeRequest) and request.refill_seed is None


def test_a_malformed_request_is_refused() -> None:
    for header in ({"op": "format-disk"}, {"op": "call"}, {"op": "loop", **SHAPE, "rounds": "many"}):
        with pytest.raises(protocol.ProtocolError, match="malformed request"):
            protocol.parse_request(header)


# -- forged replies are refused, naming what was wrong --------------------------------------------------


OK_CALL = {
    "status": "ok",
    "meta": {},
    "inputs_changed": ["x"],
    "triton_launches": 1,
    "profile": {"aten_ops": ["aten::empty"], "gpu_kernels": [], "triton_launches": 1},
    "call_s": 0.01,
}
OK_TIME = {
    "status": "ok",
    "samples_s": [1e-3, 2e-3],
    "triton_launches": 2,
    "verified": [{"round": 0, "outputs": {}, "issues": []}],
}


@pytest.mark.parametrize(
    ("request_", "header", "named"),
    [
        (CALL, {**OK_CALL, "meta": []}, "meta"),
        (CALL, {**OK_CALL, "inputs_changed": [1]}, "inputs_changed.0"),
        (CALL, {**OK_CALL, "profile": {"aten_ops": "aten::gelu"}}, "profile.aten_ops"),
        (CALL, {**OK_CALL, "profile": {"aten_ops": [None]}}, "profile.aten_ops.0"),
        (CALL, {**OK_CALL, "profile": {"triton_launches": "7"}}, "profile.triton_launches"),
        (CALL, {**OK_CALL, "triton_launches": "many"}, "triton_launches"),
        (CALL, {**OK_CALL, "triton_launches": True}, "triton_launches"),
        (CALL, {**OK_CALL, "call_s": "soon"}, "call_s"),
        (CALL, {k: v for k, v in OK_CALL.items() if k != "meta"}, "meta: Field required"),
        (CALL, {**OK_CALL, "verdict": "passed"}, "verdict: Extra inputs are not permitted"),
        (CALL, {"status": "error", "type": "ValueError", "message": 3}, "message"),
        (CALL, {"status": "error", "type": "ValueError", "message": "x", "fatal": "no"}, "fatal"),
        (TIME, {**OK_TIME, "samples_s": ["fast"]}, "samples_s.0"),
        (TIME, {**OK_TIME, "samples_s": [True]}, "samples_s.0"),
        (TIME, {**OK_TIME, "verified": [{"round": 1.0, "issues": []}]}, "verified.0.round"),
        (TIME, {**OK_TIME, "verified": [{"round": 1, "outputs": [], "issues": []}]}, "verified.0.outputs"),
        (TIME, {**OK_TIME, "verified": [{"round": 1, "issues": [None]}]}, "verified.0.issues.0"),
        (TIME, {**OK_TIME, "verified": ["round 1"]}, "verified.0"),
        (LOOP, {"status": "ok", "wall_s": "0.1", "triton_launches": 1}, "wall_s"),
    ],
    ids=[
        "meta-not-dict",
        "changed-not-names",
        "ops-not-list",
        "ops-not-names",
        "profile-launches",
        "launches-text",
        "launches-bool",
        "call-s-text",
        "meta-missing",
        "extra-field",
        "error-message",
        "error-fatal",
        "samples-text",
        "samples-bool",
        "round-float",
        "round-outputs",
        "round-issues",
        "round-not-object",
        "loop-wall-text",
    ],
)
def test_a_forged_reply_is_refused_naming_the_field(
    request_: protocol.CallRequest | protocol.TimeRequest | protocol.LoopRequest, header: dict[str, Any], named: str
) -> None:
    message = refused(header, request_.replies)
    assert message.startswith(f"malformed {header['status']!r} reply") and named in message, message


def test_the_honest_forms_of_the_forged_replies_parse() -> None:
    assert isinstance(protocol.parse_reply(OK_CALL, CALL.replies), protocol.Called)
    assert isinstance(protocol.parse_reply(OK_TIME, TIME.replies), protocol.Timed)


def test_a_reply_of_a_status_not_due_is_refused() -> None:
    assert refused({"message": "no status"}, CALL.replies) == "the message has no status"
    assert refused({"status": 1}, CALL.replies) == "the message has no status"
    assert "status 'passed'" in refused({"status": "passed"}, CALL.replies)
    assert "status 'ready'" in refused({"status": "ready"}, CALL.replies), "a greeting is not the answer to a call"
    assert "status 'ok'" in refused(OK_CALL, protocol.GREETING), "nor is an answer a greeting"
    # the same fields as a call's answer, to a time request: not a timing reply
    assert "samples_s: Field required" in refused(OK_CALL, TIME.replies)


def test_a_huge_forged_reply_is_summed_up_not_echoed() -> None:
    message = refused({**OK_CALL, "inputs_changed": list(range(100_000))}, CALL.replies)
    assert "(and 99997 more)" in message and len(message) < 1000


# -- frames and payloads ---------------------------------------------------------------------------------


def test_frames_are_a_length_a_json_header_and_the_blob() -> None:
    """The adversarial submissions frame by hand; this pins the format they assume."""
    read, write = os.pipe()
    protocol.send(write, protocol.Looped(wall_s=0.5, triton_launches=2), b"abc")
    os.close(write)
    (size,) = struct.unpack("<Q", os.read(read, 8))
    assert json.loads(os.read(read, size)) == {"status": "ok", "wall_s": 0.5, "triton_launches": 2, "blob": 3}
    assert os.read(read, 10) == b"abc"
    os.close(read)


def test_frames_too_large_are_refused_before_they_are_read() -> None:
    for frame, reason in (
        (struct.pack("<Q", 1 << 40), "exceeds the 1048576-byte limit"),
        (struct.pack("<Q", 11) + b"not json!!!", "not JSON"),
    ):
        read, write = os.pipe()
        os.write(write, frame)
        os.close(write)
        with pytest.raises(protocol.ProtocolError, match=reason):
            protocol.recv(read, time.monotonic() + 5)
        os.close(read)
    read, write = os.pipe()
    head = json.dumps({"status": "ready", "blob": 1 << 40}).encode()
    os.write(write, struct.pack("<Q", len(head)) + head)
    with pytest.raises(protocol.ProtocolError, match="payload size 1099511627776 is outside 0..0"):
        protocol.recv(read, time.monotonic() + 5, max_blob=0)
    os.close(read)
    os.close(write)


def test_only_uncompressed_torch_save_archives_pass() -> None:
    real = protocol.pack_tensors({"out": torch.zeros(64)})
    protocol.check_archive(real)
    protocol.check_archive(b"")
    deflated = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(real)) as src,
        zipfile.ZipFile(deflated, "w", compression=zipfile.ZIP_DEFLATED) as out,
    ):
        for name in src.namelist():
            out.writestr(name, src.read(name))
    for bad, reason in (
        (deflated.getvalue(), "compressed entries"),
        (pickle.dumps({"out": 1}), "not a torch.save archive"),
        (b"PK\x03\x04garbage", "not a readable archive"),
    ):
        with pytest.raises(protocol.ProtocolError, match=reason):
            protocol.check_archive(bad)


def test_a_pickle_payload_is_refused_before_its_header_is_read() -> None:
    """The archive is checked first: a forged reply with a pickle payload never reaches torch.load."""
    read, write = os.pipe()
    protocol.send(write, protocol.Looped(wall_s=0.5, triton_launches=2), pickle.dumps({"out": 1}))
    try:
        with pytest.raises(protocol.ProtocolError, match="not a torch.save archive"):
            protocol.read_reply(read, time.monotonic() + 5, 1 << 20, LOOP.replies)
    finally:
        os.close(read)
        os.close(write)


def _frame(head: bytes) -> int:
    """`head` as one frame through a real pipe; returns the read end (the caller closes it)."""
    read, write = os.pipe()
    os.write(write, struct.pack("<Q", len(head)) + head)
    os.close(write)
    return read


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        (b'{"status": "ok", "x": ' + b"[" * 20000 + b"]" * 20000 + b"}", "not JSON this grader reads"),
        (b'{"status": "ok", "x": ' + b"[" * 40 + b"]" * 40 + b"}", "nests deeper than 32"),
        (b'{"status": "ok", "wall_s": ' + b"9" * 5000 + b"}", "not JSON this grader reads"),
    ],
    ids=["deep-beyond-the-parser", "deep-within-the-parser", "5000-digit-integer"],
)
def test_a_hostile_header_is_a_protocol_error_never_an_exception_past_it(head: bytes, reason: str) -> None:
    read = _frame(head)
    try:
        with pytest.raises(protocol.ProtocolError, match=reason):
            protocol.read_reply(read, time.monotonic() + 5, 0, {"ok": protocol.Looped})
    finally:
        os.close(read)


def test_the_honest_form_of_a_nested_header_reads() -> None:
    read = _frame(json.dumps({"status": "ok", "wall_s": 0.5, "triton_launches": 2}).encode())
    try:
        reply, blob = protocol.read_reply(read, time.monotonic() + 5, 0, {"ok": protocol.Looped})
    finally:
        os.close(read)
    assert isinstance(reply, protocol.Looped) and reply.triton_launches == 2 and blob == b""


def test_a_timed_replys_host_steps_are_bounded_numbers() -> None:
    """The worker's own step times travel for GRADER_TRACE only, and are held to a shape anyway."""
    timed = protocol.Timed(samples_s=[1e-3], triton_launches=1, host_s={"warm-up": 0.5, "rounds": 0.05})
    assert through_pipe(timed, b"", TIME.replies)[0] == timed
    header = {"status": "ok", "samples_s": [1e-3], "triton_launches": 1}
    with pytest.raises(protocol.ProtocolError, match="host_s"):
        protocol.parse_reply({**header, "host_s": {str(i): 0.1 for i in range(9)}}, TIME.replies)
    with pytest.raises(protocol.ProtocolError, match="host_s"):
        protocol.parse_reply({**header, "host_s": {"rounds": "fast"}}, TIME.replies)


def test_an_out_of_bounds_access_the_interpreter_caught_leaves_the_worker_running() -> None:
    """Its message says what a GPU would do ("an illegal memory access"); nothing is broken, so the
    worker is not restarted for every such case (5 s each); a real CUDA error still ends it."""
    from triton.runtime.errors import InterpreterError

    from grader.engine.harness.tracebacks import ends_the_worker

    caught = InterpreterError('OutOfBounds("tl.load ... stops with an illegal memory access. Hint: ...")')
    assert not worker.describe_exception(caught, Path("/nowhere")).fatal
    assert ends_the_worker(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert ends_the_worker(torch.AcceleratorError("CUDA error: unspecified launch failure"))
    assert not ends_the_worker(ValueError("block size too large"))


def test_an_interpreter_error_reads_as_the_kernel_lines_own_error() -> None:
    """Triton's interpreter wraps the error of the kernel's line; the report names that error, as
    `pytest handout` does, not the wrapper's repr of it."""
    from triton.runtime.errors import InterpreterError

    try:
        try:
            raise IndexError("index 9 is out of bounds for axis 0 with size 4")
        except IndexError as inner:
            raise InterpreterError(repr(inner)) from inner
    except InterpreterError as caught:
        described = worker.describe_exception(caught, Path("/nowhere"))
    assert described.message.startswith("IndexError: index 9 is out of bounds"), described.message
    assert described.type == "InterpreterError" and not described.fatal
