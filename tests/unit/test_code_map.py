"""docs/architecture.md's code map names every module of the product, and only files that exist.

A map that drifts from the tree misleads the next engineer more than no map at all: a module added, moved or
removed without its line in the map fails here.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["minikafka", "protocol", "storage", "broker", "integration", "spark_connector"]
PATH = re.compile(r"`((?:" + "|".join(PRODUCT) + r")/[\w/]*\.py)`")


def _code_map() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("## Code map")
    return text[start:text.index("\n## ", start + 1)]


def _modules() -> set[str]:
    return {str(p.relative_to(ROOT)) for folder in PRODUCT for p in (ROOT / folder).rglob("*.py")
            if p.name != "__init__.py" and "__pycache__" not in p.parts}


def test_every_module_has_its_line_in_the_code_map() -> None:
    named = set(PATH.findall(_code_map()))
    assert sorted(_modules() - named) == []


def test_the_code_map_names_only_modules_that_exist() -> None:
    named = set(PATH.findall(_code_map()))
    assert sorted(named - _modules()) == []


def test_each_module_has_one_line() -> None:
    lines = [m for line in _code_map().splitlines() for m in PATH.findall(line)[:1] if line.lstrip().startswith("- ")]
    assert sorted(p for p in set(lines) if lines.count(p) > 1) == []
