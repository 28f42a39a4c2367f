"""kafka-python makes each of its message classes from a JSON spec, read when the class is defined, i.e. when
`kafka` is first imported, with `importlib.resources.read_text`, which Python 3.11 and 3.12 deprecate. A first import
of kafka-python thus warns twice per class (read_text, then open_text): hundreds of DeprecationWarnings in a pytest
run, none of them the user's to act on, whatever API is called. minikafka imports kafka-python (and loads classes
from its own specs) inside `quiet_schema_loading()`, which drops exactly these warnings.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

_READ_TEXT_DEPRECATED = r"(read|open)_text is deprecated"


@contextmanager
def quiet_schema_loading() -> Iterator[None]:
    """Drop the read_text/open_text DeprecationWarnings of message specs loaded in the block, and nothing else. As
    warnings.catch_warnings, it changes the process's filters: use it on the main thread (a test's), not a broker's."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", _READ_TEXT_DEPRECATED, DeprecationWarning)
        yield
