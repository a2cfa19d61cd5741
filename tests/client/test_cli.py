"""`sundial enqueue | dequeue | ack | fail | cancel | messages | work` against a real server, and
SIGTERM draining a real `sundial work` process. Budget: about 6 s."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

from app.client import Client, NewMessage
from tests.client import conftest
from tests.processes import ROOT, SUNDIAL

sundial = conftest.sundial
"""The fixture, importable from here too (test_dequeue_many.py, test_worker_many.py)."""


def test_script_round_trip_with_json_output(q: str, sundial, client: Client) -> None:
    client.put_queue(q, max_attempts=2)
    out = sundial("enqueue", q, "--payload", '{"n": 1}', "--id", "a", "--metadata", "k=v", "--json")
    assert json.loads(out.stdout) == {"id": "a", "state": "pending", "created": True}
    sundial("enqueue", q, "--payload", "2", "--id", "b", "--priority", "-5")
    sundial("enqueue", q, "--id", "c", "--delay", "3600")

    [leased] = json.loads(sundial("dequeue", q, "--json").stdout)
    assert (leased["id"], leased["payload"]) == ("b", 2)  # lowest priority first
    done = json.loads(sundial("ack", q, "b", leased["lease_id"], "--json").stdout)
    assert done["state"] == "completed"

    [leased] = json.loads(sundial("dequeue", q, "--count", "5", "--wait", "1", "--json").stdout)
    assert leased["metadata"] == {"k": "v"}
    failed = sundial("fail", q, "a", leased["lease_id"], "--error", "nope", "--json")
    assert json.loads(failed.stdout)["last_error"] == "nope"
    sundial("cancel", q, "c", "--reason", "not needed")

    listed = json.loads(sundial("messages", q, "--state", "canceled", "--json").stdout)
    assert [m["id"] for m in listed] == ["c"]
    table = sundial("messages", q).stdout
    assert all(f" {i} " in table for i in "abc"), table
    assert "completed" in table


def test_errors_are_one_clear_line(q: str, sundial, client: Client) -> None:
    client.put_queue(q)
    missing = sundial("ack", q, "ghost", "lease", code=1)
    assert "not_found" in missing.output
    bad = sundial("enqueue", q, "--payload", "{not json", code=2)
    assert "--payload" in bad.output
    refused = sundial("enqueue", q, "--delay", "-3", code=1)
    assert "validation_error" in refused.output
    assert "delay_seconds" in refused.output


def test_enqueue_a_file_in_batches(q: str, sundial, client: Client, tmp_path: Path) -> None:
    client.put_queue(q)
    lines = [json.dumps({"id": f"m{i}", "payload": i}) for i in range(2500)]
    path = tmp_path / "messages.jsonl"
    path.write_text("\n".join(lines) + "\n")
    first = json.loads(sundial("enqueue", q, "--file", str(path), "--json").stdout)
    assert first == {"created": 2500, "existing": 0}
    again = json.loads(sundial("enqueue", q, "--file", str(path), "--json").stdout)
    assert again == {"created": 0, "existing": 2500}
    assert client.get_queue(q).counts["pending"] == 2500


def test_work_in_burst_mode(q: str, sundial, client: Client) -> None:
    client.put_queue(q)
    client.enqueue(q, {"hello": "world"}, id="r1", metadata={"sundial.reply_to": "jobs.replies"})
    client.put_queue(q + ".replies")
    result = sundial("work", "--queue", q, "--handler", "tests.client.handlers:echo", "--burst")
    assert "1 completed" in result.stderr
    reply = client.get_message(q + ".replies", "r1")
    assert reply.payload == {"ok": True, "result": {"echo": {"hello": "world"}}}
    bad = sundial("work", "--queue", q, "--handler", "tests.client.handlers", code=2)
    assert "MODULE:FUNCTION" in bad.output


def test_sigterm_drains_a_working_process(q: str, server: str, token: str, client: Client) -> None:
    client.put_queue(q, lease_seconds=60)
    total = 40
    client.enqueue_many(q, [NewMessage(id=f"m{i:02}", payload=i) for i in range(total)])
    env = {**os.environ, "SUNDIAL_URL": server, "SUNDIAL_TOKEN": token}
    command = [str(SUNDIAL), "work", "--queue", q, "--handler"]
    command += ["tests.client.handlers:print_and_work", "--concurrency", "4"]
    # Unbuffered: readline() then takes no more than the first line from the pipe, and
    # communicate(), which reads the pipe itself, gets every line after it.
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().decode()  # blocks until a handler has started
        assert first.startswith("start "), first
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
        rest, errors = out.decode(), err.decode()
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, errors
    started = set(re.findall(r"start (m\d\d)", first + rest))
    states = {m.id: m.state for m in client.messages(q)}
    # Every message it started was finished; it started nothing after the signal beyond the
    # batch in hand; the rest is untouched; nothing is left running or lost.
    assert {i for i, s in states.items() if s == "completed"} == started
    assert {i for i, s in states.items() if s == "pending"} == set(states) - started
    assert len(states) == total
    assert len(started) < total
    assert "failed, 0 released, 0 lost" in errors, errors
