"""Fixtures for the whole suite: Apache Kafka beside shoal (tests/reference/fixtures.py).

CPython 3.11 before 3.11.8 keeps the AST constructor's recursion depth in interpreter-wide state, so
two threads calling ``ast.parse`` at once can fail one of them with "SystemError: AST constructor
recursion depth mismatch" (python/cpython#106905). In this suite they do: pytest rewrites test modules
with ``ast.parse`` on the main thread while an embedded broker's or a client's thread formats a
traceback (3.11's traceback module parses the failing line to place its carets). One lock around
``ast.parse`` keeps them apart; on fixed versions it costs nothing worth measuring. The lock is
reentrant: a garbage collection inside ``ast.parse`` can run a finalizer that logs a traceback (an
asyncio task destroyed while pending), which parses again on the same thread; a plain lock deadlocked
there (a CI run hung on it while reporting a failure).
"""

import ast
import sys
import threading

if sys.version_info < (3, 11, 8):
    _parse, _lock = ast.parse, threading.RLock()

    def _serialized_parse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        with _lock:
            return _parse(*args, **kwargs)

    ast.parse = _serialized_parse

pytest_plugins = ["tests.reference.fixtures"]
