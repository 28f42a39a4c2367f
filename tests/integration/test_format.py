"""`minikafka format --add-scram`: a node formatted with bootstrap SCRAM credentials serves a SCRAM-only listener
from its first start, so the first admin can log in (as `kafka-storage.sh format --add-scram`), and so can the
node's own connections (its inter-broker login is that admin)."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from minikafka.broker.controller.bootstrap_metadata import parse_add_scram
from minikafka.config import ConfigError

TIMEOUT_S = 60
SCRAM_ONLY = """\
listeners=SASL_PLAINTEXT://127.0.0.1:0
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT
inter.broker.listener.name=SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=\
org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";
log.dirs={data}
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka", *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)


def _serve(properties: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "-c", str(properties), "--log-level",
                             "WARNING"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        found = re.match(r"minikafka listening on (\S+)", line)
        if found:
            return proc, found.group(1)
    proc.kill()
    proc.wait(TIMEOUT_S)
    raise AssertionError("the formatted node did not start")


def _brokers_seen(bootstrap: str, password: str) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": password})
    return sorted(admin.list_topics(timeout=10).brokers)


def test_a_scram_only_node_formatted_with_its_admin_lets_it_in(tmp_path: Path):
    properties = tmp_path / "server.properties"
    properties.write_text(SCRAM_ONLY.format(data=tmp_path / "data"))
    formatted = cli("format", "-c", str(properties), "-t", "4L6g3nShT-eMCtK--X86sw",
                    "--add-scram", "SCRAM-SHA-512=[name=admin,iterations=8192,password=admin-secret]")
    assert formatted.returncode == 0, formatted.stderr
    assert "cluster.id=4L6g3nShT-eMCtK--X86sw" in (tmp_path / "data" / "meta.properties").read_text()
    again = cli("format", "-c", str(properties))
    assert again.returncode == 2 and "is already formatted" in again.stderr
    assert cli("format", "-c", str(properties), "--ignore-formatted").returncode == 0
    proc, bootstrap = _serve(properties)
    try:
        assert _brokers_seen(bootstrap, "admin-secret") == [1]
        with pytest.raises(KafkaException):
            _brokers_seen(bootstrap, "wrong")
    finally:
        proc.terminate()
        proc.wait(TIMEOUT_S)


@pytest.mark.parametrize("argument, message", [
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[name=a]", "You must supply 'password' to add-scram"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=10]", "The number of iterations must be between 4096 and 16384"),
    ("SCRAM-SHA-256=name=a", "expected MECHANISM=[name=...,password=...]"),
])
def test_bad_add_scram_arguments_say_what_is_wrong(argument: str, message: str):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_add_scram(argument)
