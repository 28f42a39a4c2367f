"""The documentation's commands run as written, its examples pass, and config/server.properties starts a broker.

Every ```sh block of README.md and docs/*.md is read command by command (a trailing backslash continues a line,
`&&` separates commands, `#` starts a comment), and each command is one of:
- a client command (`minikafka topics|produce|consume|share-consume|groups|transactions|fault|features ...`, or a
  printf piped into `minikafka produce`): run through bash exactly as written, against the broker the block is about.
  That is a server the same block starts, or else a `minikafka.Broker()` the test starts for the file; the commands
  reach it through $MINIKAFKA_BOOTSTRAP_SERVER, the documented default of --bootstrap-server, and a documented port
  in the command (9092, ...) is that broker's. It must exit 0; what a `produce` line wrote must come out of a later
  `consume` line of the same topic that reads from the beginning to the end;
- a server (`minikafka serve`, `minikafka cluster`): started in a scratch directory (with the repository's
  config/ beside it), documented ports replaced by free ones (`serve` without a port gets the one 9092 stands
  for), waited for until it prints its ready lines, and stopped with Ctrl-C's SIGINT at the end of its block,
  when it must exit 0. Servers on consecutive lines start together, as in several terminals;
- `minikafka --version` / `--help`, or `curl` against a server the block started (where curl is not installed,
  the URL is fetched and grepped in Python): run, exit 0;
- one of the commands in NOT_RUN, which are not run, each for the reason given there.
Any other command fails the test, as does a fenced block in a language not in FENCE_LANGUAGES: new documentation
cannot go unchecked. The output formats of the commands are not compared, only their exit status and the records.
"""
from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import minikafka
from minikafka.cli import SERVE_DEFAULTS, build_parser
from minikafka.cli_common import BOOTSTRAP_ENV
from minikafka.config import BROKER_PROPERTIES, BrokerConfig
from minikafka.storage.properties import read_properties
from tests.helpers import held_free_port

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SERVER_PROPERTIES = ROOT / "config" / "server.properties"
FENCE_LANGUAGES = {"sh", "python", "properties", "text"}
# Ports the documentation names; each block gets free ones in their place.
DOCUMENTED_PORTS = ("9092", "9093", "9094", "9404")
COMMAND_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
EXAMPLES_TIMEOUT_S = 600.0

# Commands the test does not run: (a regular expression matching the command, why).
NOT_RUN = [
    (r"^python3? -m venv ", "makes a virtual environment: the test runs in one"),
    (r"^\. \.venv/bin/activate$", "activates the virtual environment the test runs in"),
    (r"^pip install ", "installs packages: .ci/install_check installs from the clone, tox installs the extras"),
    (r"^tox( |$)", "runs the test suite, of which this test is a part"),
    (r"^pytest ", "runs tests: tox runs them all"),
    (r"^python bench/", "a benchmark: runs for minutes and prints figures that no test asserts"),
    (r"^python -m minikafka\.spark_connector\.examples\.",
     "needs PySpark and Java: tests/spark/test_spark_pipeline.py runs this example in the spark tox env"),
    (r"^minikafka serve .*zookeeper\.connect=", "needs a ZooKeeper ensemble at the address given"),
    (r"^minikafka cluster .*--zookeeper$",
     "needs ZooKeeper and Java; tests/zookeeper/test_zk_cluster_handle.py runs this very command"),
    (r"^minikafka format -c server\.properties ",
     "needs the node's server.properties; tests/integration/test_format.py formats and serves such a node"),
    (r"^minikafka (acls|users) ",
     "needs a secured broker with an authorizer and the admin's client properties; tests/integration/test_cli_acls.py "
     "and test_cli_users.py run these commands"),
    (r"^minikafka transactions abort ",
     "needs a hanging transaction at that offset; tests/integration/test_cli.py makes and aborts them"),
]
READY_BROKER = "minikafka listening on "
READY_CONTROLLER = "minikafka controller listening on "


# ---- reading the documentation ---------------------------------------------------------------------------------------

@dataclass
class Block:
    path: Path
    line: int  # the line of the opening fence, 1-based
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, indented ones (in list items) included."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        opening = re.match(r"^(\s*)```(.*)$", lines[i])
        if opening is None:
            i += 1
            continue
        indent, info = opening.group(1), opening.group(2).strip()
        start = i + 1
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        assert i < len(lines), f"{path.relative_to(ROOT)}:{start}: the block opened here is never closed"
        blocks.append(Block(path, start, info.split()[0] if info else "", "\n".join(body)))
        i += 1
    return blocks


def commands(block: Block) -> list[tuple[str, str]]:
    """(where, command) for each command of a shell block: continuation lines joined, `&&` split, comments and
    blank lines left out."""
    out = []
    pending = ""
    first = 0
    for number, raw in enumerate(block.text.splitlines(), block.line + 1):
        if not pending:
            first = number
        line = f"{pending} {raw.strip()}" if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        pending = ""
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split(" && "):
            out.append((f"{block.path.relative_to(ROOT)}:{first}", part.strip()))
    assert not pending, f"{block.where}: the block ends in a continued line"
    return out


def classify(command: str) -> tuple[str, str]:
    """(kind, detail): kind is not-run (detail: why), server, client, produce-pipe, local, http or unknown."""
    for pattern, why in NOT_RUN:
        if re.search(pattern, command):
            return "not-run", why
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return "unknown", f"not a shell command: {exc}"
    stages: list[list[str]] = [[]]
    for word in words:
        if word == "|":
            stages.append([])
        else:
            stages[-1].append(word)
    programs = [stage[0] if stage else "" for stage in stages]
    if programs[0] == "curl" and all(p in ("curl", "grep") for p in programs):
        return "http", ""
    if len(stages) == 2 and programs == ["printf", "minikafka"] and stages[1][1:2] == ["produce"]:
        return "produce-pipe", ""
    if len(stages) != 1 or programs[0] != "minikafka" or len(words) < 2:
        return "unknown", "not a command the test knows how to check"
    if words[1] in ("--version", "--help", "-h") or "--help" in words:
        return "local", ""
    if words[1] in ("serve", "cluster"):
        return "server", words[1]
    if words[1] in ("topics", "produce", "consume", "share-consume", "groups", "transactions", "fault", "features"):
        return "client", words[1]
    return "unknown", f"unknown minikafka subcommand {words[1]!r}"


def parse_cli(words: list[str], where: str):
    """The command's arguments as `minikafka` parses them."""
    try:
        return build_parser().parse_args(words)
    except SystemExit:
        pytest.fail(f"{where}: `minikafka {' '.join(words)}` does not parse")


def unescape(text: str) -> bytes:
    return text.encode().decode("unicode_escape").encode("latin-1")


# ---- running it ------------------------------------------------------------------------------------------------------

def command_env(bootstrap: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop(BOOTSTRAP_ENV, None)
    if bootstrap is not None:
        env[BOOTSTRAP_ENV] = bootstrap
    return env


def run_shell(command: str, cwd: Path, env: dict[str, str], where: str) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(["bash", "-c", f"set -o pipefail\n{command}"], cwd=cwd, env=env, capture_output=True,
                              timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: `{command}` did not finish in {COMMAND_TIMEOUT_S} s")
    assert proc.returncode == 0, (f"{where}: `{command}` exited {proc.returncode}\nstdout: {proc.stdout.decode()}\n"
                                  f"stderr: {proc.stderr.decode()}")
    return proc


def fetch_like_curl(command: str, where: str) -> None:
    """`curl -s URL [| grep WORD]` where curl is not installed: the URL is fetched and WORD looked for in it."""
    stages = [shlex.split(stage) for stage in command.split(" | ")]
    url = next(w for w in stages[0][1:] if not w.startswith("-"))
    with urllib.request.urlopen(url if "://" in url else f"http://{url}", timeout=COMMAND_TIMEOUT_S) as response:
        body = response.read().decode()
    for stage in stages[1:]:
        word = next(w for w in stage[1:] if not w.startswith("-"))
        assert word in body, f"{where}: `{command}`: no {word!r} in what {url} served"


class PortMap:
    """The documented ports of one block, each replaced by a free port held for what the block starts."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self.ports: dict[str, str] = {}

    def port(self, documented: str) -> str:
        if documented not in self.ports:
            self.ports[documented] = str(self._stack.enter_context(held_free_port()))
        return self.ports[documented]

    def rewrite(self, command: str) -> str:
        pattern = r"(?<![\d.])(" + "|".join(DOCUMENTED_PORTS) + r")(?!\d)"
        return re.sub(pattern, lambda m: self.port(m.group(1)), command)


@dataclass
class Server:
    """A `minikafka serve` or `minikafka cluster` started from the documentation, in its own session (as a terminal
    runs it, so Ctrl-C reaches its whole process group)."""

    command: str
    where: str
    process: subprocess.Popen
    stderr_path: Path
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue = field(default_factory=queue.Queue)

    @classmethod
    def start(cls, command: str, where: str, cwd: Path, stderr_path: Path) -> Server:
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=command_env(),
                                       stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)
        server = cls(command, where, process, stderr_path)
        threading.Thread(target=server._read, daemon=True).start()
        return server

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self._queue.put(raw.decode(errors="replace").rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, prefixes: dict[str, int]) -> None:
        """Until the server has printed `count` lines starting with each prefix."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while any(sum(line.startswith(p) for line in self.lines) < n for p, n in prefixes.items()):
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.fail(f"printed no {prefixes} lines in {READY_TIMEOUT_S} s")
            if line is None:
                self.process.wait(STOP_TIMEOUT_S)
                self.fail(f"exited {self.process.returncode} before it was ready")
            self.lines.append(line)

    def broker_addresses(self) -> list[str]:
        return [line[len(READY_BROKER):].split()[0] for line in self.lines if line.startswith(READY_BROKER)]

    def stop(self) -> None:
        """Ctrl-C, as in the terminal that runs it: a clean stop, exit status 0."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            status = self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.fail(f"did not stop within {STOP_TIMEOUT_S} s of SIGINT")
        if status != 0:
            self.fail(f"exited {status} on SIGINT")

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def fail(self, what: str) -> None:
        pytest.fail(f"{self.where}: `{self.command}` {what}\nstdout: {self.lines}\n"
                    f"stderr: {self.stderr_path.read_text(errors='replace')[-3000:]}")


class DocRun:
    """The shell blocks of one documentation file, run in order in a scratch directory."""

    def __init__(self, path: Path, workdir: Path, stack: ExitStack) -> None:
        self.path = path
        self.workdir = workdir
        self._stack = stack
        self._broker: minikafka.Broker | None = None
        self.produced: dict[tuple[str, str], list[bytes]] = {}  # (bootstrap, topic) -> values, in order
        self.group_reads: set[tuple[str, str, str]] = set()
        self.read_back: set[tuple[str, str]] = set()  # the (bootstrap, topic)s a consume line was checked against
        self.servers_started = 0
        shutil.copytree(ROOT / "config", workdir / "config")

    def file_broker(self) -> minikafka.Broker:
        """The broker the file's client commands talk to when their block starts no server."""
        if self._broker is None:
            self._broker = self._stack.enter_context(
                minikafka.Broker(data_dir=self.workdir / "test-broker-data", in_process=True))
        return self._broker

    def run_block(self, block: Block) -> None:
        servers: list[Server] = []
        with ExitStack() as block_stack:
            ports = PortMap(block_stack)
            bootstrap: str | None = None
            starting: list[tuple[Server, dict[str, int]]] = []  # servers started together, as in several terminals
            try:
                for where, command in commands(block):
                    kind, detail = classify(command)
                    if kind == "unknown":
                        pytest.fail(f"{where}: `{command}`: {detail}. Make it a command this test runs, or add it "
                                    "to NOT_RUN with the reason it is not run.")
                    if kind == "not-run":
                        continue
                    if kind == "server":
                        started = self.start_server(command, where, ports)
                        servers.append(started[0])
                        starting.append(started)
                        continue
                    for server, ready in starting:
                        server.wait_for(ready)
                    starting = []
                    if bootstrap is None:
                        bootstrap = self.bootstrap(servers, ports)
                    if kind == "http" and shutil.which("curl") is None:
                        fetch_like_curl(ports.rewrite(command), where)
                        continue
                    if kind in ("local", "http"):
                        run_shell(ports.rewrite(command), self.workdir, command_env(), where)
                        continue
                    self.run_client(kind, ports.rewrite(command), where, bootstrap)
                for server, ready in starting:
                    server.wait_for(ready)
                for server in reversed(servers):  # brokers before the controller they registered with
                    server.stop()
            finally:
                for server in servers:
                    server.kill()

    def bootstrap(self, servers: list[Server], ports: PortMap) -> str:
        """The broker a block's client commands talk to: the one a server of the block runs on the block's 9092
        (else its first broker), or, in a block that starts none, the file's broker, whose port 9092 stands for."""
        addresses = [a for server in servers for a in server.broker_addresses()]
        if addresses:
            own = [a for a in addresses if a.endswith(f":{ports.ports.get('9092')}")]
            return (own or addresses)[0]
        broker = self.file_broker()
        ports.ports.setdefault("9092", str(broker.port))
        return broker.bootstrap_servers

    def start_server(self, command: str, where: str, ports: PortMap) -> tuple[Server, dict[str, int]]:
        """The server, started (not yet ready), and the lines it prints once ready."""
        words = shlex.split(command)
        args = parse_cli(words[1:], where)
        if words[1] == "serve":
            if not {"--port", "--listeners", "--host"} & set(words):
                command += f" --port {ports.port('9092')}"  # the default listener, 9092, as this block's 9092
            roles = [o.partition("=")[2] for o in args.override if o.startswith("process.roles=")]
            ready = {READY_CONTROLLER: 1} if roles == ["controller"] else {READY_BROKER: 1}
        elif args.zookeeper or args.zookeeper_connect:
            pytest.fail(f"{where}: `{command}`: a ZooKeeper-mode cluster this test does not start; add it to "
                        "NOT_RUN with the test that runs it")
        else:
            ready = {READY_CONTROLLER: 1, READY_BROKER: args.brokers}
        self.servers_started += 1
        server = Server.start(ports.rewrite(command), where, self.workdir,
                              self.workdir / f"server-{self.servers_started}.stderr")
        return server, ready

    def run_client(self, kind: str, command: str, where: str, bootstrap: str) -> None:
        proc = run_shell(command, self.workdir, command_env(bootstrap), where)
        if kind == "produce-pipe":
            self.note_produced(command, where, bootstrap)
        elif shlex.split(command)[1] == "consume":
            self.check_consumed(command, where, bootstrap, proc.stdout)

    def note_produced(self, command: str, where: str, bootstrap: str) -> None:
        printf, _, produce = command.partition(" | ")
        payload = subprocess.run(["bash", "-c", printf], capture_output=True, check=True).stdout
        args = parse_cli(shlex.split(produce)[1:], where)
        messages = payload.split(unescape(args.delimiter))
        if messages and messages[-1] == b"":
            messages.pop()
        values = []
        for message in messages:
            if args.key_delimiter is not None:
                _key, sep, value = message.partition(unescape(args.key_delimiter))
                values.append(value if sep else message)
            else:
                values.append(message)
        self.produced.setdefault((bootstrap, args.topic), []).extend(values)

    def check_consumed(self, command: str, where: str, bootstrap: str, stdout: bytes) -> None:
        """A consume that reads the whole topic and prints values shows every value produced to it."""
        args = parse_cli(shlex.split(command)[1:], where)
        expected = self.produced.get((bootstrap, args.topic))
        if not expected or not args.exit or args.count is not None or args.partition or args.offset != "beginning":
            return
        if args.format is not None and "%s" not in args.format:
            return
        if args.group is not None:
            first_read = (bootstrap, args.group, args.topic) not in self.group_reads
            self.group_reads.add((bootstrap, args.group, args.topic))
            if not first_read:
                return
        self.read_back.add((bootstrap, args.topic))
        missing = [v for v in expected if v not in stdout]
        assert not missing, f"{where}: `{command}` did not print {missing} produced before; it printed {stdout!r}"


# ---- the tests -------------------------------------------------------------------------------------------------------

def test_every_documentation_file_is_checked():
    names = {p.relative_to(ROOT).as_posix() for p in DOC_FILES}
    assert {"README.md", "docs/cli.md", "docs/testing.md", "docs/operations.md"} <= names


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_fenced_blocks_are_in_known_languages(path):
    for block in fenced_blocks(path):
        assert block.language in FENCE_LANGUAGES, (
            f"{block.where}: a block in {block.language or 'no language'!r}; this test checks "
            f"{sorted(FENCE_LANGUAGES)} (shell commands go in ```sh blocks)")


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_blocks_compile(path):
    for block in fenced_blocks(path):
        if block.language == "python":
            try:
                compile(block.text, block.where, "exec")
            except SyntaxError as exc:
                pytest.fail(f"{block.where}: {exc}")


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shell_blocks_run_as_written(path, tmp_path):
    with ExitStack() as stack:
        run = DocRun(path, tmp_path, stack)
        for block in fenced_blocks(path):
            if block.language == "sh":
                run.run_block(block)
    unread = sorted(topic for (_bootstrap, topic) in set(run.produced) - run.read_back)
    assert not unread, (f"{path.relative_to(ROOT)} produces to {unread} but shows no `consume -e` from the beginning "
                        "that prints the values, so the records are not checked")


# The example tests each page shows, at least (the README: a Broker() test, a fixture test and a Cluster failover
# test; the testing guide: whole tests written with the waits, the faults and a recording; the status page's; virtual
# time's).
EXAMPLE_TESTS = {"README.md": 3, "docs/testing.md": 6, "docs/status-page.md": 1, "docs/virtual-time.md": 1}


@pytest.mark.parametrize("page", sorted(EXAMPLE_TESTS))
def test_example_tests_pass(page, tmp_path):
    """A page's example tests, each a file of its own, pass under pytest with the installed plugin."""
    files = []
    for n, block in enumerate(b for b in fenced_blocks(ROOT / page) if b.language == "python"):
        if re.search(r"^def test_", block.text, re.M):
            path = tmp_path / f"test_example_{n}.py"
            path.write_text(f"# {block.where}\n{block.text}\n", encoding="utf-8")
            files.append(path.name)
    assert len(files) >= EXAMPLE_TESTS[page], f"{page} shows fewer example tests than it did"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
                           "ignore::DeprecationWarning", *files], cwd=tmp_path, capture_output=True,
                          timeout=EXAMPLES_TIMEOUT_S, env=command_env())
    assert proc.returncode == 0, proc.stdout.decode()[-6000:] + proc.stderr.decode()[-2000:]


def test_server_properties_sets_the_defaults_serve_starts_with():
    """config/server.properties holds only properties minikafka acts on, each at the value `serve` starts with."""
    props = read_properties(SERVER_PROPERTIES)
    assert {"listeners", "log.dirs", "num.partitions"} <= set(props)
    unknown = sorted(set(props) - set(BROKER_PROPERTIES))
    assert not unknown, f"not properties minikafka acts on: {unknown}"
    given = BrokerConfig(props)
    defaults = BrokerConfig(dict(SERVE_DEFAULTS))
    differing = {name: value for name, value in props.items() if given.get(name) != defaults.get(name)}
    assert not differing, f"values that are not the defaults `minikafka serve` starts with: {differing}"


def test_serve_starts_with_server_properties(tmp_path):
    """`minikafka serve --config config/server.properties`, its listener and log dir moved to a free port and a
    scratch dir, starts, takes every property, and stops cleanly."""
    data = tmp_path / "data"
    command = f"minikafka serve --config config/server.properties --port 0 --data-dir {shlex.quote(str(data))}"
    server = Server.start(command, "test", ROOT, tmp_path / "serve.stderr")
    try:
        server.wait_for({READY_BROKER: 1})
        (address,) = server.broker_addresses()
        run_shell("minikafka topics create --topic from-server-properties", tmp_path, command_env(address), "test")
        server.stop()
    finally:
        server.kill()
    stderr = (tmp_path / "serve.stderr").read_text(errors="replace")
    assert "isn't a known config" not in stderr, stderr
    assert (data / "meta.properties").is_file()
    assert (data / "from-server-properties-0").is_dir()


def test_spark_connector_without_pyspark_says_what_to_install():
    # None in sys.modules makes `import pyspark` fail as where it is not installed, in any environment.
    code = "import sys; sys.modules['pyspark'] = None; import minikafka.spark_connector"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=COMMAND_TIMEOUT_S)
    assert proc.returncode != 0
    last = proc.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("ImportError: ") and 'pip install ".[spark]"' in last, last
    assert 'pip install "minikafka[spark]"' in last, last


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.S | re.M)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_reach_their_files_and_headings(path):
    text = re.sub(r"^\s*```.*?^\s*```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        assert linked.exists(), f"{path.relative_to(ROOT)}: the link {target} leads nowhere"
        if anchor:
            assert anchor in _anchors(linked), f"{path.relative_to(ROOT)}: no heading #{anchor} in {linked.name}"
