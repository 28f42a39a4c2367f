"""`minikafka produce --transactional-id` on an input that stays open, through the CLI against a real broker."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import wait_until
from tests.integration.test_cli import CLI_TIMEOUT_S, cli, wait_for_transaction

# Generous: a commit is a few round trips, but the machine may be loaded.
VISIBLE_WITHIN_S = 60.0


def committed_values(broker, topic: str) -> list[bytes]:
    return [r.value for r in broker.state.records(topic, isolation_level="read_committed")]


# ---- produce on a pipe kept open -----------------------------------------------------------------------------------

def test_a_pipe_kept_open_commits_each_batch_of_input_as_it_comes(minikafka_session_broker):
    broker = minikafka_session_broker
    topic = "cli-tx-stream"
    cli(broker, "topics", "create", "--topic", topic)
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "produce", "-t", topic, "--transactional-id",
                             "cli-streamer", "--progress", "--bootstrap-server", broker.bootstrap_servers],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"a\nb\n")
        proc.stdin.flush()
        # Nothing more comes yet, and the input is not closed: what came is committed all the same.
        wait_until(lambda: committed_values(broker, topic) == [b"a", b"b"], timeout=VISIBLE_WITHIN_S,
                   message="read_committed readers to see a and b while stdin stays open")
        assert proc.poll() is None
        state = broker.state.partition(topic, 0)
        assert state.last_stable_offset == state.high_watermark == 3  # after the commit marker
        proc.stdin.write(b"c\n")
        proc.stdin.flush()
        wait_until(lambda: committed_values(broker, topic) == [b"a", b"b", b"c"], timeout=VISIBLE_WITHIN_S,
                   message="read_committed readers to see c while stdin stays open")
        _, stderr = proc.communicate(timeout=CLI_TIMEOUT_S)  # closes stdin: the end of the input
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 0, stderr
    assert stderr.decode().splitlines()[-1] == f"% Produced 3 messages to {topic} in 2 transaction(s)"
    wait_for_transaction(broker, "cli-streamer", "CompleteCommit")


def test_a_file_is_one_transaction_unless_the_transaction_size_bounds_it(minikafka_session_broker, tmp_path: Path):
    broker = minikafka_session_broker
    topic = "cli-tx-file"
    cli(broker, "topics", "create", "--topic", topic)
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"".join(b"m%d\n" % i for i in range(7)))
    whole = cli(broker, "produce", "-t", topic, "--transactional-id", "cli-file", "--progress", "--file", str(lines))
    assert whole.stderr.decode().splitlines()[-1] == f"% Produced 7 messages to {topic} in 1 transaction(s)"
    bounded = cli(broker, "produce", "-t", topic, "--transactional-id", "cli-file", "--transaction-size", "3",
                  "--progress", "--file", str(lines))
    assert bounded.stderr.decode().splitlines()[-1] == f"% Produced 7 messages to {topic} in 3 transaction(s)"
    wait_for_transaction(broker, "cli-file", "CompleteCommit")
    assert committed_values(broker, topic) == [b"m%d" % i for i in range(7)] * 2
