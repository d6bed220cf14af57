"""Property-based fuzzing of the document parsers and the chunker (hypothesis).

Every fuzzed input is timed; the session's total (how many inputs, how long) is
printed in the terminal summary and kept in pytest's cache under
``groundwire/fuzz`` (``.pytest_cache/v/groundwire/fuzz``)."""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

T = TypeVar("T")


@dataclass
class FuzzTally:
    """Inputs run and seconds spent, per fuzz target."""

    inputs: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    slowest: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    @contextmanager
    def timed(self, target: str, limit_s: float) -> Iterator[None]:
        """Counts one input of ``target``; a generous timeout (``limit_s``, an alarm in
        the main thread) stops an input that hangs, rather than an assertion on a time
        a loaded machine can stretch."""

        def hung(_signum: int, _frame: object) -> None:
            raise TimeoutError(f"{target}: one input ran past {limit_s} s (a hang)")

        previous = signal.signal(signal.SIGALRM, hung)
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        started = time.perf_counter()
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            elapsed = time.perf_counter() - started
            self.inputs[target] += 1
            self.seconds[target] += elapsed
            self.slowest[target] = max(self.slowest[target], elapsed)

    def run(self, target: str, limit_s: float, call: Callable[[], T]) -> T:
        with self.timed(target, limit_s):
            return call()


_TALLY = pytest.StashKey[FuzzTally]()


@pytest.fixture(scope="session")
def fuzz_tally(pytestconfig: pytest.Config) -> FuzzTally:
    return pytestconfig.stash.setdefault(_TALLY, FuzzTally())


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    tally = config.stash.get(_TALLY, None)
    if tally is None or not tally.inputs:
        return
    total = sum(tally.inputs.values())
    seconds = sum(tally.seconds.values())
    terminalreporter.write_sep("-", "fuzzing")
    terminalreporter.write_line(f"fuzz: {total} inputs in {seconds:.1f} s")
    for target in sorted(tally.inputs):
        terminalreporter.write_line(
            f"  {target}: {tally.inputs[target]} inputs, {tally.seconds[target]:.1f} s, "
            f"slowest {tally.slowest[target] * 1000:.0f} ms"
        )
    cache = getattr(config, "cache", None)  # absent with -p no:cacheprovider
    if cache is not None:
        cache.set(
            "groundwire/fuzz",
            {
                "inputs": total,
                "seconds": round(seconds, 2),
                "targets": {
                    t: {"inputs": n, "seconds": round(tally.seconds[t], 2)}
                    for t, n in tally.inputs.items()
                },
            },
        )
