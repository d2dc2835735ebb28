"""Fuzz target: the hostlist core (expand, count, nth, index_of, compress, the count lists).

Inputs come from a seeded random generator (fast enough for a million inputs on one
core): hostlist expressions built from Slurm's grammar and then mutated (stray or nested
brackets, blanks, newlines, NULs, non-ASCII and non-UTF-8 text, signs, numbers around
2**64, zero padding, reversed and oversized ranges), host lists for ``compress`` (runs,
mixed widths, duplicates, shuffles, names without numbers, hostile names), task-count
lists, and now and then an input near the documented size limits. Invariants, for every
input:

* the only exceptions are ``TfslurmError`` subclasses (``ValueError``);
* every error message is one line of at most ``MAX_MESSAGE`` characters;
* no input of up to ``TIME_BOUND_HOSTS`` hosts takes ``MAX_SECONDS`` or more of CPU time
  in tfslurm's calls, and no larger one more than that per ``TIME_BOUND_HOSTS`` hosts
  (linear time; docs/hostlist.md, "Bounds"). The checks' own reference sort is not
  counted; wall time on a shared machine also counts other processes' stalls, so it is
  reported beside it, and only over ``MAX_WALL_SECONDS`` (a hang) fails. Expressions go
  up to ``MAX_HOSTS`` hosts, host lists for ``compress`` up to 300,000 hosts;
* ``count(e) == len(expand(e))``, ``nth``/``index_of`` agree with ``expand``;
* an expression (and what ``compress`` writes) of up to ``MAX_READ_BOTH`` characters gives
  the same hosts or the same error read with string methods as with regular expressions
  (``grammar.SMALL_EXPR`` set to read it either way);
* ``expand(compress(x, sort=s)) == (slurm_sorted(x) if s else x)``, where
  ``slurm_sorted`` orders hosts as ``scontrol show hostlistsorted`` does (tfslurm's
  ``hostrange_cmp`` key, host by host);
* ``expand_counts(compress_counts(c)) == c``.

The suite runs it briefly (``tests/test_fuzz_hostlist.py``, a fixed number of inputs);
at length:

    PYTHONPATH=. .venv/bin/python tests/fuzz_hostlist.py --inputs 1000000

which prints inputs run, crashes, round-trip failures, the slowest input, peak RSS and
the run time (and a progress line every 100,000 inputs).
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable

from tfslurm import hostlist
from tfslurm.errors import TfslurmError
from tfslurm.hostlist import compression, grammar, natural

MAX_MESSAGE = 300
MAX_SECONDS = 1.0
TIME_BOUND_HOSTS = 100_000  # the size up to which one input's calls take under MAX_SECONDS
MAX_WALL_SECONDS = 10.0  # a hang (waiting uses no CPU)
MAX_READ_BOTH = 20_000  # characters of an expression read both ways (readings_agree)

_NAME_CHARS = "abnrx-_.0123456789"
_HOSTILE_CHARS = "[],- \t\n\r\x00\x0b+()x*é\udcff\u0663²"
_PREFIXES = ["n", "node", "rack1-n", "a1b", "", "gpu", "x-", "r2n", "é", "n0"]


def slurm_sorted(hosts: list[str]) -> list[str]:
    """The hosts in ``scontrol show hostlistsorted`` order: Slurm sorts runs (not hosts) and
    splits overlapping ones, so the reference is the host-by-host transcription of
    Slurm's code (checked against scontrol by the differential tests)."""
    return hostlist.expand(compression.compress_by_host(hosts, True))


def prefix_order_holds(sorted_hosts: list[str]) -> bool:
    """Hosts of one prefix together, prefixes in natural order (by the reference key)."""
    prefixes = [host.rstrip("0123456789") for host in sorted_hosts]
    keys = [natural.natural_key(p) for p in dict.fromkeys(prefixes)]
    return keys == sorted(keys) and len(keys) == len(set(keys))


def _read_as(expr: str, small_expr: int) -> object:
    """expand and count of ``expr``, or the error's text, with grammar.SMALL_EXPR set."""
    saved = grammar.SMALL_EXPR
    grammar.SMALL_EXPR = small_expr
    try:
        return hostlist.expand(expr), hostlist.count(expr)
    except TfslurmError as exc:
        return str(exc)
    finally:
        grammar.SMALL_EXPR = saved


def readings_agree(expr: str) -> bool:
    """Whether an expression gives the same hosts or error read without regular
    expressions as with them (true of one too long to read both ways in a fuzz run)."""
    return len(expr) > MAX_READ_BOTH or _read_as(expr, sys.maxsize) == _read_as(expr, -1)


# ---- generators ---------------------------------------------------------------------------


def _number(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.75:
        value = rng.randint(0, 1200)
    elif pick < 0.9:
        value = rng.randint(0, 10 ** rng.randint(1, 19))
    else:
        value = 2**64 + rng.randint(-3, 3)
    width = rng.choice((0, 0, 0, 1, 2, 3, 4, 6, 21))
    return f"{max(value, 0):0{width}d}"


def _ranges(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 5))):
        low = _number(rng)
        pick = rng.random()
        if pick < 0.5:
            parts.append(low)
        elif pick < 0.9 and low.isdigit() and len(low) < 19:
            parts.append(f"{low}-{int(low) + rng.choice((0, 1, 2, 5, 13, 120, 70000))}")
        else:
            parts.append(f"{low}-{_number(rng)}")
    return ",".join(parts)


def _text(rng: random.Random, hostile: float) -> str:
    chars = [
        rng.choice(_HOSTILE_CHARS if rng.random() < hostile else _NAME_CHARS)
        for _ in range(rng.choice((0, 1, 1, 2, 3, 5)))
    ]
    return "".join(chars)


def expression(rng: random.Random) -> str:
    hostile = rng.choice((0.0, 0.0, 0.0, 0.05, 0.3))
    items = []
    for _ in range(rng.choice((0, 1, 1, 2, 3, 6))):
        item = rng.choice(_PREFIXES) if rng.random() < 0.5 else _text(rng, hostile)
        for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
            item += f"[{_ranges(rng)}]" + (_text(rng, hostile) if rng.random() < 0.3 else "")
        items.append(item)
    text = rng.choice((",", ",", " ", ",,", "\t", ", ")).join(items)
    if hostile and text and rng.random() < 0.5:  # a mutation anywhere
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(_HOSTILE_CHARS + "[]") + text[at + rng.choice((0, 0, 1)) :]
    return text


def host_list(rng: random.Random) -> list[str]:
    hosts: list[str] = []
    for _ in range(rng.choice((0, 1, 1, 2, 3, 5))):
        prefix = rng.choice(_PREFIXES)
        suffix = rng.choice(("", "", "", "", "-ib", "x"))
        start = int(_number(rng).lstrip("0") or "0") if rng.random() < 0.3 else rng.randint(0, 1100)
        width = rng.choice((0, 0, 1, 2, 3, 5))
        hosts += [f"{prefix}{n:0{width}d}{suffix}" for n in range(start, start + rng.randint(1, 12))]
    if hosts and rng.random() < 0.3:
        hosts += rng.choices(hosts, k=rng.randint(1, 6))
    if rng.random() < 0.5:
        rng.shuffle(hosts)
    if rng.random() < 0.05:
        hosts.append(_text(rng, 0.5) or "")
    return [h for h in hosts if h] if rng.random() < 0.98 else hosts


def count_list(rng: random.Random) -> str:
    items = []
    for _ in range(rng.randint(0, 5)):
        value = rng.choice(("1", "2", "16", "0", "65535", "9" * 25, "-1", "²", " 3 "))
        items.append(
            value + (f"(x{rng.choice(('2', '3', '1', '0', '99999999', ''))})" if rng.random() < 0.3 else "")
        )
    return ",".join(items)


_BIG: dict[int, tuple[str, object]] = {}  # made once: shuffling a million costs seconds


def _shuffled(count: int) -> list[int]:
    numbers = list(range(count))
    random.Random(count).shuffle(numbers)
    return numbers


def big_input(rng: random.Random) -> tuple[str, object]:
    """An input near the documented limits (MAX_HOSTS, MAX_CHARS, MAX_RANGE_HOSTS)."""
    which = rng.randrange(13)
    if which not in _BIG:
        _BIG[which] = _big_inputs()[which]()
    return _BIG[which]


def _big_inputs() -> list[Callable[[], tuple[str, object]]]:
    limit = hostlist.MAX_HOSTS
    return [
        lambda: ("expr", "n," * (limit - 1) + "n"),
        lambda: ("expr", "n[1]," + "n," * (limit - 2) + "n"),
        lambda: ("expr", "rack[1-2621]-n[001-400]"),
        lambda: ("expr", "h[1-700]x[1-1000]J"),
        lambda: ("expr", "n[" + ",".join(map(str, _shuffled(limit))) + "]"),
        lambda: ("expr", "a[0-65535]b[0-15]"),
        lambda: ("expr", "x" * 60 + "[1-65536]," + "y" * 60 + "[1-65536]"),
        lambda: ("expr", "n[1-2]" * 40),
        lambda: ("expr", "n[" + "1," * 500_000 + "x]"),
        lambda: ("hosts", [f"n{i}-ib" for i in _shuffled(300_000)]),
        lambda: ("hosts", [f"n{i}" for i in _shuffled(300_000)]),
        lambda: ("hosts", hostlist.expand("h[1-300]x[1-1000]J")),
        lambda: ("counts", "2(x1048576)"),
    ]


# ---- one input ----------------------------------------------------------------------------


class RoundTripError(AssertionError):
    """An invariant between results failed (not an error message)."""


def _error(exc: BaseException) -> str:
    if not isinstance(exc, TfslurmError):
        raise exc  # a crash: the caller counts it
    message = str(exc)
    if "\n" in message or "\r" in message or len(message) > MAX_MESSAGE:
        raise AssertionError(f"bad message ({len(message)} chars): {message[:120]!r}")
    return type(exc).__name__


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise RoundTripError(what)


_SPENT = [0.0, 0.0]  # CPU and wall seconds spent in tfslurm's calls for the current input
_HOSTS = [0]  # the current input's size: its hosts (or count-list entries)


def cpu_bound(hosts: int) -> float:
    """The CPU seconds an input of this many hosts may take: MAX_SECONDS up to
    TIME_BOUND_HOSTS, then as much again per TIME_BOUND_HOSTS hosts (linear)."""
    return MAX_SECONDS * max(1.0, hosts / TIME_BOUND_HOSTS)


def _call(function: Callable[..., object], *args: object, **kwargs: object) -> object:
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        return function(*args, **kwargs)
    finally:
        _SPENT[0] += time.process_time() - cpu_started
        _SPENT[1] += time.perf_counter() - started


def check(kind: str, value: object, rng: random.Random) -> str:
    """Run one input; return "ok" or the error class's name. Raises on a violation."""
    if kind == "expr":
        assert isinstance(value, str)
        _expect(readings_agree(value), "short and long readings differ")
        try:
            hosts = _call(hostlist.expand, value)
            _HOSTS[0] = len(hosts)
        except Exception as exc:
            outcome = _error(exc)
            try:
                _call(hostlist.count, value)
            except Exception as again:
                _error(again)
            else:
                raise RoundTripError("count succeeded where expand failed")
            return outcome
        assert isinstance(hosts, list)
        _expect(_call(hostlist.count, value) == len(hosts), "count != len(expand)")
        if hosts and len(hosts) < 5000:
            index = rng.randrange(-len(hosts), len(hosts))
            _expect(_call(hostlist.nth, value, index) == hosts[index], "nth != expand[i]")
            found = _call(hostlist.index_of, value, hosts[index])
            _expect(found == hosts.index(hosts[index]), "index_of")
        if len(hosts) > 300_000:
            return "ok"  # compress is fuzzed up to 300,000 hosts (see the module docstring)
        value = hosts
    if kind in ("expr", "hosts"):
        assert isinstance(value, list)
        _HOSTS[0] = len(value)
        sort = rng.random() < 0.5
        try:
            text = _call(hostlist.compress, value, sort=sort)
        except Exception as exc:
            return _error(exc)
        assert isinstance(text, str)
        back = _call(hostlist.expand, text)
        _expect(readings_agree(text), "short and long readings of compress's text differ")
        if not sort:
            _expect(back == value, "expand(compress(x)) != x")
            return "ok"
        _expect(Counter(back) == Counter(value), "sorted compress invented or lost hosts")
        if len(value) < 20_000:
            _expect(back == slurm_sorted(value), "expand(compress(x, sort=True)) != slurm_sorted(x)")
            _expect(prefix_order_holds(back), "sorted hosts out of prefix order")
        return "ok"
    assert isinstance(value, str)
    try:
        counts = _call(hostlist.expand_counts, value)
    except Exception as exc:
        return _error(exc)
    _HOSTS[0] = len(counts)
    written = _call(hostlist.compress_counts, counts)
    _expect(_call(hostlist.expand_counts, written) == counts, "counts round trip")
    return "ok"


def one_input(rng: random.Random) -> tuple[str, object]:
    pick = rng.random()
    if pick < 0.0001:  # about a hundred in a million inputs: each takes a second or more
        return big_input(rng)
    if pick < 0.55:
        return "expr", expression(rng)
    if pick < 0.92:
        return "hosts", host_list(rng)
    return "counts", count_list(rng)


def run(inputs: int, seed: int, report: Callable[[str], None], progress: int = 0) -> dict[str, object]:
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    crashes = round_trips = over_limit = 0
    slowest = (0.0, "")
    slowest_wall = 0.0
    started = time.perf_counter()
    for number in range(1, inputs + 1):
        kind, value = one_input(rng)
        _SPENT[:] = [0.0, 0.0]
        _HOSTS[0] = 0
        if number % 1000 == 1:  # collected, then out of the collector's reach: a full
            gc.collect()  # collection over the fuzzer's own heap is not an input's time
            gc.freeze()  # (untimed; freezing garbage as well would only grow the heap)
        try:
            outcomes[check(kind, value, rng)] += 1
        except RoundTripError as exc:
            round_trips += 1
            if round_trips <= 5:
                report(f"ROUND TRIP {exc}: {kind} {_shown(value)}")
        except Exception as exc:  # a crash, or a bad message
            crashes += 1
            if crashes <= 5:
                report(f"CRASH {type(exc).__name__}: {str(exc)[:200]}: {kind} {_shown(value)}")
        took = _SPENT[0]
        if took > slowest[0]:
            slowest = (took, f"{kind} {_shown(value)} ({_HOSTS[0]} hosts)")
        if took >= cpu_bound(_HOSTS[0]) or _SPENT[1] >= MAX_WALL_SECONDS:
            over_limit += 1
            if over_limit <= 50:
                report(
                    f"SLOW {took:.2f} s of CPU, {_SPENT[1]:.2f} s wall, {_HOSTS[0]} hosts: {kind} {_shown(value)}"
                )
        slowest_wall = max(slowest_wall, _SPENT[1])
        if progress and number % progress == 0:
            report(f"... {number} inputs, {crashes} crashes, {round_trips} round-trip failures, "
                   f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    gc.unfreeze()  # give what the loop froze back to the collector
    summary = {
        "inputs": inputs,
        "crashes": crashes,
        "round_trip_failures": round_trips,
        "over_limit": over_limit,
        "slowest_s": slowest[0],
        "slowest_input": slowest[1],
        "slowest_wall_s": slowest_wall,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": time.perf_counter() - started,
        "outcomes": dict(outcomes.most_common()),
    }
    report(
        f"{inputs} inputs (seed {seed}), {crashes} crashes, {round_trips} round-trip failures, "
        f"{over_limit} over the time bound; "
        f"slowest {slowest[0] * 1000:.1f} ms of CPU ({slowest[1]}), longest wall time "
        f"{slowest_wall * 1000:.1f} ms; peak RSS "
        f"{summary['peak_rss_mib']:.0f} MiB; {summary['seconds']:.0f} s; outcomes {summary['outcomes']}"
    )
    return summary


def _shown(value: object) -> str:
    if isinstance(value, list):
        return f"list of {len(value)} hosts {value[:20]!r}"[:300]
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + f"... ({len(text)} chars)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="how many inputs (default 100000)")
    parser.add_argument("--seed", type=int, default=None, help="seed (default: random)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    summary = run(args.inputs, seed, lambda line: print(line, flush=True), progress=100_000)
    failed = summary["crashes"] or summary["round_trip_failures"] or summary["over_limit"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
