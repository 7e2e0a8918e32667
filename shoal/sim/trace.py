"""What a simulated run leaves behind: its trace, the faults it injected, its violations."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Violation:
    """An invariant that did not hold: which one, at which step, and what was seen."""

    invariant: str
    step: int
    time_ms: int
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} at step {self.step} (t={self.time_ms} ms): {self.detail}"


@dataclass
class Trace:
    """The ordered record of a run. Lines carry virtual time only, so the same seed gives the
    same lines; `digest` compares two runs cheaply."""

    keep_lines: bool = True
    lines: list[str] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    steps: int = 0
    clock: Callable[[], float] = lambda: 0.0  # virtual seconds (the run's loop.time)
    _hash: hashlib._Hash = field(default_factory=hashlib.sha256)

    def now_ms(self) -> int:
        return round(self.clock() * 1000)

    def emit(self, text: str) -> int:
        """Record one step; returns its number (violations name it)."""
        self.steps += 1
        line = f"{self.steps:06d} {self.now_ms():>8} {text}"
        self._hash.update(line.encode())
        self._hash.update(b"\n")
        if self.keep_lines:
            self.lines.append(line)
        return self.steps

    def fault(self, kind: str, text: str) -> None:
        """An injected fault: counted by kind and traced."""
        self.faults[kind] += 1
        self.emit(f"FAULT {kind} {text}")

    def violation(self, invariant: str, detail: str) -> None:
        step = self.emit(f"VIOLATION {invariant}: {detail}")
        self.violations.append(Violation(invariant, step, self.now_ms(), detail))

    def digest(self) -> str:
        return self._hash.hexdigest()
