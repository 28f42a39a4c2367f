"""`minikafka serve --security ... --user ...` for a laptop, and the client commands over its secured listener with
Kafka's client properties (--command-config) or kcat's -X."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

TIMEOUT_S = 60


@pytest.fixture(scope="module")
def secured_serve(tmp_path_factory):
    base = tmp_path_factory.mktemp("serve")
    data = base / "data"
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--data-dir", str(data),
                             "--security", "sasl_ssl", "--user", "alice:alice-secret", "--log-level", "WARNING"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("minikafka listening on"):
                break
        text = "".join(lines)
        address = re.search(r"minikafka listening on (\S+)", text)
        assert address, text
        yield {"bootstrap": address.group(1), "text": text, "base": base}
    finally:
        proc.terminate()
        proc.wait(TIMEOUT_S)


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minikafka", *args], input=stdin, capture_output=True,
                          timeout=TIMEOUT_S, check=False)


def test_serve_prints_the_ca_and_a_client_config_that_the_commands_take(secured_serve):
    text, base = secured_serve["text"], secured_serve["base"]
    ca = Path(re.search(r"minikafka CA certificate: (\S+)", text).group(1))
    config = Path(re.search(r"minikafka client config: (\S+)", text).group(1))
    assert ca == base / "data-tls" / "ca.pem" and ca.read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert "security.protocol=SASL_SSL" in config.read_text() and oct(config.stat().st_mode & 0o777) == "0o600"
    bootstrap = secured_serve["bootstrap"]
    secured = ["--bootstrap-server", bootstrap, "--command-config", str(config)]
    created = cli("topics", "create", "-t", "laptop", "--partitions", "1", *secured)
    assert created.returncode == 0, created.stderr
    produced = cli("produce", "-t", "laptop", *secured, "--quiet", stdin=b"one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = cli("consume", "-t", "laptop", "-o", "beginning", "-e", *secured)
    assert consumed.stdout.split() == [b"one", b"two"], consumed.stderr
    # kcat's way: librdkafka's property names with -X
    kcat_style = ["--bootstrap-server", bootstrap, "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={ca}",
                  "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
    listed = cli("topics", "list", *kcat_style)
    assert "laptop" in listed.stdout.decode().split(), listed.stderr
    faults = cli("fault", "list", *secured)
    assert faults.returncode == 0, faults.stderr


def test_without_credentials_the_commands_fail_in_one_line(secured_serve):
    base = secured_serve["base"]
    ca = base / "data-tls" / "ca.pem"
    wrong = cli("topics", "list", "--bootstrap-server", secured_serve["bootstrap"], "-X", "security.protocol=SASL_SSL",
                "-X", f"ssl.ca.location={ca}", "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice",
                "-X", "sasl.password=wrong")
    assert wrong.returncode != 0
    assert len(wrong.stderr.decode().strip().splitlines()) == 1, wrong.stderr
    jks = cli("topics", "list", "--bootstrap-server", secured_serve["bootstrap"], "-X", "security.protocol=SSL",
              "-X", "ssl.truststore.location=/x.jks")
    assert jks.returncode != 0 and b"PEM" in jks.stderr
