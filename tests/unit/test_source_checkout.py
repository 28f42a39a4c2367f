"""A source checkout is a whole `minikafka` package when its root comes first on sys.path.

A script, `python -m pytest` or a node's `python -m minikafka` started from the clone's root imports the clone's
`minikafka/` folder ahead of an installed copy (a non-editable `pip install .`). Here the interpreter starts without
`site` (so no editable-install import hook) and sees the environment's packages only as a plain path entry, which
is what such an installed copy looks like from the root of the clone.
"""
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_checkout_root_imports_every_subpackage() -> None:
    code = (
        "import sys; sys.path.insert(0, ''); sys.path.append(sys.argv[1]);"
        "import minikafka, minikafka.storage.log, minikafka.broker.kafka_node, minikafka.integration.pytest_plugin;"
        "import minikafka.protocol.control_plane;"
        "print(minikafka.broker.kafka_node.__file__)"
    )
    result = subprocess.run([sys.executable, "-S", "-c", code, sysconfig.get_paths()["purelib"]], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == ROOT / "broker" / "kafka_node.py"
