"""A local ZooKeeper server for ZooKeeper mode, run from the machine's own installation (the Debian/Ubuntu package
`zookeeper`), as Kafka's own quickstart runs one beside its brokers.

The server is a standalone `QuorumPeerMain` JVM with its own zoo.cfg, data dir and log file, listening on
127.0.0.1 on a port held from the first start until `close()`, so it can be stopped, killed and restarted on the
same port and data while clients reconnect. The tick is short (500 ms) so sessions as short as one second are
allowed, which is what lets tests expire sessions quickly.
"""
from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from minikafka.local_server import LocalServer
from minikafka.node_handle import property_value

DEFAULT_JAR_DIR = Path("/usr/share/java")  # where the Debian/Ubuntu package puts zookeeper.jar and its dependencies
ZOOKEEPER_JAR = "zookeeper.jar"  # its manifest names the dependency jars beside it
LOGGING_JAR = "slf4j-simple.jar"  # a logging binding (the package's libslf4j-java has it); without one, no log
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# A client JVM's usual start-up tuning: the server needs little heap and no optimising compiler to serve tests.
JVM_OPTIONS = ("-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms16m", "-Xmx256m",
               "-Djava.awt.headless=true")
TICK_TIME_MS = 500  # ZooKeeper's minimum session timeout is two ticks: sessions from 1000 ms
MAX_SESSION_TIMEOUT_MS = 60000  # above Kafka's zookeeper.session.timeout.ms default (18000)
FOUR_LETTER_WORDS = "srvr,ruok,stat,mntr,cons,dump"
DEFAULT_START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
READY_POLL_S = 0.02
COMMAND_TIMEOUT_S = 2.0


class ZooKeeperNotInstalled(RuntimeError):
    """No ZooKeeper installation (or no Java) on this machine: nothing was started."""


class ZooKeeperStartError(RuntimeError):
    """The server exited or did not answer before its start timeout; the message has its log."""


@dataclass(frozen=True)
class ZooKeeperInstallation:
    """The Java runtime and the classpath of the machine's ZooKeeper."""

    java: str
    classpath: tuple[str, ...]

    @classmethod
    def find(cls, jar_dir: str | Path | None = None) -> ZooKeeperInstallation:
        """The installation whose jars are in `jar_dir` (Debian's /usr/share/java by default), with Java from
        JAVA_HOME or PATH; ZooKeeperNotInstalled, naming the package to install, when either is missing."""
        jars = Path(jar_dir) if jar_dir is not None else DEFAULT_JAR_DIR
        server_jar = jars / ZOOKEEPER_JAR
        if not server_jar.is_file():
            raise ZooKeeperNotInstalled(
                f"ZooKeeper is not installed: no {server_jar}. Install the Debian/Ubuntu package `zookeeper` "
                "(sudo apt-get install zookeeper).")
        java = _find_java()
        if java is None:
            raise ZooKeeperNotInstalled(
                "ZooKeeper needs Java and none was found (JAVA_HOME unset and no `java` on PATH). Install the "
                "Debian/Ubuntu package `zookeeper`, which brings a Java runtime (sudo apt-get install zookeeper).")
        classpath = [str(server_jar)]
        if (jars / LOGGING_JAR).is_file():
            classpath.append(str(jars / LOGGING_JAR))
        return cls(java, tuple(classpath))


def _find_java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def _kill(process: subprocess.Popen) -> None:
    """SIGKILL unless it has exited, and reap it."""
    if process.poll() is None:
        process.kill()
    process.wait(STOP_TIMEOUT_S)


def _log_tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class ZooKeeperServer(LocalServer):
    """One standalone ZooKeeper server, not started until `start()` or `with`; restartable on the same port and
    data dir. `config` adds or overrides zoo.cfg entries (e.g. `{"forceSync": "no"}`)."""

    def __init__(self, port: int | None = None, data_dir: str | Path | None = None, keep_data: bool = False, *,
                 host: str = "127.0.0.1", jar_dir: str | Path | None = None,
                 config: Mapping[str, object] | None = None,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        self.installation = ZooKeeperInstallation.find(jar_dir)  # before anything is created or started
        super().__init__(host=host, port=port, data_dir=data_dir, keep_data=keep_data,
                         temp_prefix="minikafka-zookeeper-")
        self.start_timeout_s = start_timeout_s
        self.config = {k: property_value(v) for k, v in (config or {}).items()}
        self.conf_dir = self.data_dir / "conf"
        self.log_path = self.data_dir / "zookeeper.log"
        self._process: subprocess.Popen | None = None

    # ---- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the server and return once it serves requests (ZooKeeperStartError, with its log, if not)."""
        if self.running:
            return self
        if self._process is not None:  # it ended by itself: reap what is left
            self.kill()
        if not self._reserve_port() and self._port == 0:
            self._port = _free_port(self.host)
        self._write_config()
        command = [self.installation.java, *JVM_OPTIONS,
                   "-cp", os.pathsep.join([str(self.conf_dir), *self.installation.classpath]),
                   MAIN_CLASS, str(self.conf_dir / "zoo.cfg")]
        with open(self.log_path, "ab") as log_file:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file,
                                             stderr=subprocess.STDOUT, cwd=self.data_dir, process_group=0)
        self._guard(functools.partial(_kill, self._process))
        try:
            self._wait_until_serving()
        except BaseException:
            self.kill()
            raise
        return self

    def _write_config(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "tickTime": str(TICK_TIME_MS),
            "dataDir": str(self.data_dir),
            "clientPort": str(self._port),
            "clientPortAddress": self.host,
            "maxSessionTimeout": str(MAX_SESSION_TIMEOUT_MS),
            "admin.enableServer": "false",
            "4lw.commands.whitelist": FOUR_LETTER_WORDS,
            **self.config,
        }
        (self.conf_dir / "zoo.cfg").write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        # slf4j-simple reads this from the classpath; it logs to stderr, which goes to the log file.
        (self.conf_dir / "simplelogger.properties").write_text(
            "org.slf4j.simpleLogger.defaultLogLevel=info\n"
            "org.slf4j.simpleLogger.showDateTime=true\n"
            "org.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS\n")

    def _wait_until_serving(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            code = self._process.poll()
            if code is not None:
                raise ZooKeeperStartError(f"ZooKeeper on port {self._port} exited with code {code} before it "
                                          f"served; log {self.log_path}:\n{_log_tail(self.log_path)}")
            try:
                if self.command("srvr").startswith("Zookeeper version:"):
                    return
            except OSError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise ZooKeeperStartError(f"ZooKeeper on port {self._port} did not serve within "
                                          f"{self.start_timeout_s:.0f} s; log {self.log_path}:\n"
                                          f"{_log_tail(self.log_path)}")
            time.sleep(READY_POLL_S)

    def stop(self) -> int | None:
        """Clean shutdown (SIGTERM; killed if it takes over 10 s). Returns the exit status (143, Java's after a
        SIGTERM; None if not started).

        Every acknowledged write is already in the transaction log, so the next start has all the data; sessions
        survive a restart within their timeout."""
        if self._process is None:
            return None
        try:
            if self._process.poll() is None:
                self._process.send_signal(signal.SIGTERM)
            try:
                return self._process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                return self._process.wait(STOP_TIMEOUT_S)
        finally:
            self._forget_process()

    def kill(self) -> None:
        """Crash the server (SIGKILL); the next start recovers from its snapshot and transaction log."""
        if self._process is not None:
            try:
                _kill(self._process)
            finally:
                self._forget_process()

    def _forget_process(self) -> None:
        self._unguard()
        self._process = None

    # ---- where it is ----------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Started and not exited."""
        return self._process is not None and self._process.poll() is None

    @property
    def port(self) -> int:
        """The client port (0 before the first start when none was given)."""
        return self._port

    @property
    def connect_string(self) -> str:
        """HOST:PORT for `zookeeper.connect` (append a chroot such as `/kafka` as needed)."""
        if self._port == 0:
            raise RuntimeError("ZooKeeper has no port yet: start() it first")
        return f"{self.host}:{self._port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def command(self, word: str) -> str:
        """The server's answer to a four-letter word (`srvr`, `ruok`, `stat`, `mntr`, `cons`, `dump`)."""
        with socket.create_connection((self.host, self._port), timeout=COMMAND_TIMEOUT_S) as connection:
            connection.sendall(word.encode("ascii"))
            answer = bytearray()
            while chunk := connection.recv(4096):
                answer += chunk
        return answer.decode("utf-8", errors="replace")
