"""The `minikafka` package laid out as it installs, for tools that cannot follow the editable layout.

The top-level folders map onto the `minikafka` namespace only through setuptools' package-dir (an import hook in
an editable install), which mypy and grimp cannot follow; so this lays the same mapping out as a tree of symlinks.
"""
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ["protocol", "storage", "broker", "integration", "spark_connector"]


@contextmanager
def package_tree() -> Iterator[Path]:
    """A temporary directory holding `minikafka/` as installed; removed on exit."""
    with tempfile.TemporaryDirectory(prefix="minikafka-tree-") as tmp:
        package = Path(tmp) / "minikafka"
        package.mkdir()
        for source in (ROOT / "minikafka").glob("*.py"):
            (package / source.name).symlink_to(source)
        for folder in FOLDERS:
            (package / folder).symlink_to(ROOT / folder, target_is_directory=True)
        yield Path(tmp)


def repository_paths(text: str) -> str:
    """Paths in a tool's report as they are in the repository."""
    for folder in FOLDERS:
        text = text.replace(f"minikafka/{folder}/", f"{folder}/")
    return text
