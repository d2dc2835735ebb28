"""Benchmark tfslurm.hostlist against python-hostlist, ClusterShell and Slurm's C code.

    python bench/hostlist.py [--repeat 5] [--big] [--scontrol] [--check]

A grid of rows: every size (1k, 10k, 100k hosts; ``--big`` adds 1M) and shape of

* expand: a ranged ``n[0-N]`` (runs over 65,536 hosts split, as Slurm needs), a
  bracket-free list, multi-bracket ``rack[1-R]-n[001-400]``, a zero-padded range, and the
  compressed form of shuffled hosts (what Slurm writes for scattered nodes);
* compress: sorted and shuffled hosts, each with and without ``sort=True``, shuffled names
  without a numeric tail (``n<i>-ib``) and shuffled zero-padded names, both ``sort=True``.

Each row prints tfslurm's time and, per anchor, its time and the ratio anchor / tfslurm
(> 1: tfslurm is faster), all measured in this run, best of ``--repeat`` rounds in which
tfslurm and every anchor run in turns (so load hits all alike). Anchors: python-hostlist
(``expand_hostlist``, ``collect_hostlist``, which always sorts), ClusterShell (``NodeSet``:
sorts and de-duplicates), Slurm C (libslurm's own hostlist code in-process through ctypes,
see ``bench/slurmc.py``; absent without libslurm) and, with ``--scontrol``,
``scontrol show hostnames|hostlist|hostlistsorted`` in a subprocess (process start-up
included; shown, never checked). Before timing, every anchor's answer is compared with
tfslurm's, so the figures are of the same work. The floor column is CPython alone on the
same hosts (``str.split`` of the expanded text; ``str.join`` of the list to compress).
An anchor whose growth at the smaller sizes projects over ``--limit`` seconds a call is
skipped at the larger size, and the cell says so (Slurm's C parser reads a bracket-free
list in quadratic time: about 10 s for 300k hosts here).

Checks: every anchor / tfslurm ratio >= 1.0 at 10k hosts and above, >= 0.9 at
1k; python-hostlist / tfslurm >= 1.1 expanding ``rack[1-R]-n[001-400]`` at 10k and 100k,
measured again side by side (the two alone, in turns, over more rounds); each shape's growth exponent (slope of log time against log size, 10k and up) <= 1.15,
printed beside the floor's exponent measured in the same run, so that a load or cache
excursion shows in both; peak memory (tracemalloc) of expanding the compressed form of 1M
shuffled hosts within 1.5x of the list it returns, and of sorted compress of 700k names
without a number within 3x of compressing them unsorted (the floor column there). ``--check``: exit 1 when any is missed.
``python bench/all.py`` runs this grid with the other benches as one table.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tfslurm import hostlist as ours

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/measure.py and friends
import measure
import slurmc
from measure import FLOOR, Check, Row


def _import_python_hostlist() -> Any:
    """python-hostlist (GPL; a benchmark/test oracle only). This file is named hostlist.py
    too: its directory leaves the import path while ``import hostlist`` runs."""
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != measure.HERE]
    sys.modules.pop("hostlist", None)
    try:
        import hostlist

        hostlist.MAX_SIZE = 1 << 24  # type: ignore[attr-defined]  # its default (100,000 hosts) stops the 1M rows
        return hostlist
    except ImportError:
        return None
    finally:
        sys.path[:] = saved


python_hostlist = _import_python_hostlist()
try:
    from ClusterShell import NodeSet as clustershell
except ImportError:  # an optional column
    clustershell = None

ARG_LIMIT = 128 * 1024
SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000, "1M": 1_000_000}
ANCHORS = ("python-hostlist", "ClusterShell", "Slurm C", "scontrol")
CHECKED = ("python-hostlist", "ClusterShell", "Slurm C")  # scontrol pays a process start
SORTED_MARK = "*"
MIB = 1 << 20
#: Peak memory of sorted compress of 700k names without a number, over the unsorted one's.
SORTED_MEMORY_MOST = 3.0
#: python-hostlist / tfslurm expanding rack[1-R]-n[001-400] at 10k and 100k hosts, side by side.
MULTI_BRACKET_LEAST = 1.1


class Scontrol:
    """Runs ``scontrol show <kind> <text>`` with a throwaway minimal slurm.conf."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.dir = tempfile.mkdtemp(prefix="tfslurm-bench-")
        conf = os.path.join(self.dir, "slurm.conf")
        with open(conf, "w", encoding="utf-8") as handle:
            handle.write(
                "ClusterName=bench\nSlurmctldHost=localhost\n"
                "NodeName=localhost CPUs=1\nPartitionName=bench Nodes=localhost\n"
            )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        self.env.update(SLURM_CONF=conf, TERM="dumb", INPUTRC="/dev/null")

    def run(self, kind: str, text: str) -> str:
        """scontrol's output (text over the argument limit goes on standard input)."""
        if len(text) < ARG_LIMIT:
            argv, stdin = [self.path, "show", kind, text], None
        else:
            argv, stdin = [self.path], f"show {kind} {text}\n"
        done = subprocess.run(argv, input=stdin, env=self.env, capture_output=True, text=True, check=False)
        return "\n".join(line for line in done.stdout.splitlines() if "scontrol: " not in line)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Case:
    """One shape at one size: ``text`` to expand, or ``hosts`` to compress."""

    kind: str  # "expand" or "compress"
    shape: str
    size: str
    text: str = ""
    hosts: list[str] | None = None
    sort: bool = False

    @property
    def name(self) -> str:
        return f"{self.kind} {self.shape} {self.size}"


def cases(size: str) -> Iterator[Case]:
    """Every shape at ``size`` (each built when its turn comes, to bound memory)."""
    n = SIZES[size]
    plain = [f"n{i}" for i in range(n)]
    shuffled = plain[:]
    random.Random(42).shuffle(shuffled)
    width = len(str(n)) + 1
    padded = [f"n{i:0{width}d}" for i in range(n)]
    yield Case("expand", "ranged n[0-N]", size, ours.compress(plain))
    yield Case("expand", "bracket-free", size, ",".join(plain))
    yield Case("expand", "multi-bracket rack[1-R]-n[001-400]", size, f"rack[1-{max(1, n // 400)}]-n[001-400]")
    yield Case("expand", "zero-padded n[00..0-N]", size, ours.compress(padded))
    yield Case("expand", "compressed shuffled", size, ours.compress(shuffled))
    yield Case("compress", "sorted", size, hosts=plain)
    yield Case("compress", "sorted, sort=True", size, hosts=plain, sort=True)
    yield Case("compress", "shuffled", size, hosts=shuffled)
    yield Case("compress", "shuffled, sort=True", size, hosts=shuffled, sort=True)
    tails = [f"{h}-ib" for h in shuffled]
    yield Case("compress", "shuffled n<i>-ib, sort=True", size, hosts=tails, sort=True)
    random.Random(7).shuffle(padded)
    yield Case("compress", "shuffled zero-padded, sort=True", size, hosts=padded, sort=True)


class Grid:
    """The anchors present and the rows measured so far."""

    def __init__(self, repeat: int, budget: float, limit: float, scontrol: Scontrol | None) -> None:
        self.repeat, self.budget, self.limit = repeat, budget, limit
        self.slurm = slurmc.load()
        self.scontrol = scontrol
        self.rows: list[Row] = []
        self.checks: list[Check] = []
        self.points: dict[str, list[tuple[int, Row]]] = {}  # shape -> (hosts, row)

    def anchors(self, case: Case) -> dict[str, Callable[[], object]]:
        """Each present anchor's call for ``case``, giving a list (expand) or text."""
        ph, cs, slurm, sc = python_hostlist, clustershell, self.slurm, self.scontrol
        calls: dict[str, Callable[[], object]] = {}
        text, hosts, sort = case.text, case.hosts or [], case.sort
        if case.kind == "expand":
            calls["python-hostlist"] = lambda: ph.expand_hostlist(text, allow_duplicates=True)
            if cs:
                calls["ClusterShell"] = lambda: cs.expand(text)
            if slurm:
                calls["Slurm C"] = lambda: slurm.expand(text)
            if sc:
                calls["scontrol"] = lambda: sc.run("hostnames", text).split()
        else:
            calls["python-hostlist"] = lambda: ph.collect_hostlist(hosts)
            if cs:
                calls["ClusterShell"] = lambda: str(cs.NodeSet.fromlist(hosts))
            if slurm:
                calls["Slurm C"] = lambda: slurm.compress(hosts, sort)
            if sc:
                joined = ",".join(hosts)
                calls["scontrol"] = lambda: sc.run("hostlistsorted" if sort else "hostlist", joined).strip()
        return calls

    def projected(self, shape: str, anchor: str, hosts: int) -> float:
        """Seconds one call of ``anchor`` should take at ``hosts``, extrapolated from its
        two largest sizes measured so far (growth at least linear); 0 with fewer."""
        have = [(n, row.anchors[anchor]) for n, row in self.points.get(shape, []) if anchor in row.anchors]
        if len(have) < 2:
            return 0.0
        slope = max(1.0, measure.exponent(have[-2:]))
        size, seconds = have[-1]
        return seconds * float((hosts / size) ** slope)

    def verdict(self, case: Case, anchor: str, theirs: object, mine: object) -> str | None:
        """The empty mark when the answers are equal, the sorted mark when they hold the
        same hosts in another order or form, None when they differ."""
        if case.kind == "expand":
            assert isinstance(theirs, list) and isinstance(mine, list)
            if theirs == mine:
                return ""
            return SORTED_MARK if sorted(theirs) == sorted(mine) else None
        assert isinstance(theirs, str) and isinstance(mine, str)
        if theirs in (mine, slurmc.joined(mine)):
            return ""
        hosts = python_hostlist.expand_hostlist(theirs, allow_duplicates=True)
        return SORTED_MARK if sorted(hosts) == sorted(case.hosts or []) else None

    def run_case(self, case: Case, hosts: int) -> None:
        """Verify every anchor's answer, then time tfslurm, the anchors and the floor in turns."""
        if case.kind == "expand":
            text = case.text
            mine: Callable[[], object] = lambda: ours.expand(text)  # noqa: E731
            answer = mine()
            flat = ",".join(answer)  # type: ignore[arg-type]
            floor: Callable[[], object] = lambda: flat.split(",")  # noqa: E731
        else:
            listed, sort = case.hosts or [], case.sort
            mine = lambda: ours.compress(listed, sort=sort)  # noqa: E731
            answer = mine()
            floor = lambda: ",".join(listed)  # noqa: E731
        row = Row(case.name, None)
        calls = self.anchors(case)
        for anchor in list(calls):
            projected = self.projected(f"{case.kind} {case.shape}", anchor, hosts)
            if projected > self.limit:
                row.skipped[anchor] = (
                    f"projected over {self.limit:g} s a call from its growth at smaller sizes"
                )
                del calls[anchor]
                continue
            if anchor in ("Slurm C", "scontrol") and case.kind == "expand" and slurmc.unsafe(case.text):
                row.skipped[anchor] = "a bracket of over 262,144 ranges ends Slurm's process"
                del calls[anchor]
                continue
            mark = self.verdict(case, anchor, calls[anchor](), answer)
            if mark is None:
                row.skipped[anchor] = "a different answer"
                self.checks.append((f"{case.name}: {anchor} gives tfslurm's hosts", False))
                del calls[anchor]
            elif mark:
                row.marks[anchor] = mark
        best = measure.interleaved({"tfslurm": mine, **calls, FLOOR: floor}, self.repeat, self.budget)
        row.ours = best.pop("tfslurm")
        row.anchors = best
        row.least = {a: 0.9 if hosts < 10_000 else 1.0 for a in CHECKED if a in best}
        self.rows.append(row)
        self.points.setdefault(f"{case.kind} {case.shape}", []).append((hosts, row))

    def growth(self) -> tuple[list[str], list[Check]]:
        """Per shape, the exponents of tfslurm, the floor and each anchor (10k hosts and up)."""
        anchors = [a for a in (*ANCHORS, FLOOR) if any(a in r.anchors for r in self.rows)]
        lines = [
            f"{'growth exponent, 10k hosts and up':<45}{'tfslurm':>9}" + "".join(f"{a:>17}" for a in anchors)
        ]
        checks: list[Check] = []
        for shape, points in self.points.items():
            big = [(n, row) for n, row in points if n >= 10_000]
            if len(big) < 2:
                continue
            mine = measure.exponent([(n, row.ours or 0.0) for n, row in big])
            cells = []
            for anchor in anchors:
                have = [(n, row.anchors[anchor]) for n, row in big if anchor in row.anchors]
                cells.append(f"{measure.exponent(have):17.2f}" if len(have) >= 2 else f"{'-':>17}")
            lines.append(f"{shape:<45}{mine:9.2f}" + "".join(cells))
            floor = measure.exponent([(n, row.anchors[FLOOR]) for n, row in big])
            checks.append(
                (f"{shape}: tfslurm growth exponent {mine:.2f} <= 1.15 (floor's {floor:.2f})", mine <= 1.15)
            )
        return (lines if checks else []), checks

    def side_by_side(self, size: str) -> Row:
        """Expanding ``rack[1-R]-n[001-400]`` against python-hostlist alone, in turns, over
        more rounds than the grid's (the two are close: a load excursion moves the grid's
        ratio by a tenth)."""
        text = f"rack[1-{max(1, SIZES[size] // 400)}]-n[001-400]"
        assert ours.expand(text) == python_hostlist.expand_hostlist(text, allow_duplicates=True)
        best = measure.interleaved(
            {
                "tfslurm": lambda: ours.expand(text),
                "python-hostlist": lambda: python_hostlist.expand_hostlist(text, allow_duplicates=True),
            },
            max(30, 6 * self.repeat),
            self.budget,
        )
        row = Row(f"expand {text} {size}, side by side", best.pop("tfslurm"))
        row.anchors = best
        row.least = {"python-hostlist": MULTI_BRACKET_LEAST}
        return row

    def memory(self) -> Row:
        """Peak memory of expanding the compressed form of 1M shuffled hosts, against the
        list it returns (the floor)."""
        million = [f"n{i}" for i in range(1_000_000)]
        random.Random(42).shuffle(million)
        text = ours.compress(million)
        floor = sys.getsizeof(million) + sum(map(sys.getsizeof, million))
        del million
        row = Row("peak memory: expand compressed 1M shuffled", None, unit="MiB")
        row.anchors["python-hostlist"] = peak_bytes(lambda: python_hostlist.expand_hostlist(text, True)) / MIB
        if clustershell:
            row.anchors["ClusterShell"] = peak_bytes(lambda: clustershell.expand(text)) / MIB
        if self.slurm:
            row.skipped["Slurm C"] = (
                "tracemalloc does not see C allocations (and that text has too many ranges)"
            )
        row.ours = peak_bytes(lambda: ours.expand(text)) / MIB
        row.anchors[FLOOR] = floor / MIB
        return row


def sorted_names_memory() -> Row:
    """Peak memory of sorted compress of 700k names without a number (random letters),
    against the same compress unsorted (the floor column)."""
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"
    names = ["".join(rng.choices(letters, k=8)) for _ in range(700_000)]
    row = Row("peak memory: compress 700k names without a number, sort=True", None, unit="MiB")
    row.anchors[FLOOR] = peak_bytes(lambda: ours.compress(names)) / MIB
    row.ours = peak_bytes(lambda: ours.compress(names, sort=True)) / MIB
    return row


def call_overhead(slurm: slurmc.SlurmC, repeat: int) -> str:
    """A note: how much of Slurm C's compress of 100k sorted hosts is the per-host ctypes
    call (and encoding the name), both timed here in turns."""
    hosts = [f"n{i}" for i in range(100_000)]
    best = measure.interleaved(
        {"compress": lambda: slurm.compress(hosts), "calls": lambda: slurm.call_floor(hosts)}, repeat
    )
    return (
        f"Slurm C compress, 100k sorted hosts: {best['compress'] * 10:.2f} us per host, of which "
        f"{best['calls'] * 10:.2f} us is encoding the name and one ctypes call (timed alone)"
    )


def peak_bytes(function: Callable[[], object]) -> int:
    """Peak memory allocated while ``function`` runs (tracemalloc)."""
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options this grid takes (bench/all.py offers them too)."""
    parser.add_argument("--repeat", type=int, default=5, help="rounds per row (best is kept; at least 2)")
    parser.add_argument(
        "--big", action="store_true", help="add the 1M-host rows (minutes: the anchors are slow)"
    )
    parser.add_argument("--sizes", default="1k,10k,100k", help="comma-separated, from 1k,10k,100k,1M")
    parser.add_argument(
        "--budget", type=float, default=3.0, help="seconds after which a slow call stops repeating"
    )
    parser.add_argument(
        "--limit", type=float, default=30.0, help="skip an anchor projected to take longer a call (seconds)"
    )
    parser.add_argument("--scontrol", action="store_true", help="add the scontrol subprocess column")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory row")


def run(args: argparse.Namespace, progress: Callable[[str], None] = lambda _: None) -> tuple[list[Row], list[str], list[Check]]:  # fmt: skip
    """The grid's rows, its growth and note lines, and its checks (ratio checks excluded:
    :func:`measure.ratio_checks` makes those from the rows)."""
    if python_hostlist is None:
        raise SystemExit("python-hostlist is not installed: pip install python-hostlist")
    sizes = [s for s in args.sizes.split(",") if s]
    if args.big and "1M" not in sizes:
        sizes.append("1M")
    path = shutil.which("scontrol") if args.scontrol else None
    grid = Grid(args.repeat, args.budget, args.limit, Scontrol(path) if path else None)
    notes = []
    if grid.slurm:
        notes.append(f"Slurm C: {grid.slurm.path} (API {grid.slurm.api}), in-process through ctypes")
        notes.append(call_overhead(grid.slurm, args.repeat))
    else:
        notes.append("Slurm C: no libslurm found, column left out")
    try:
        for size in sizes:
            for case in cases(size):
                hosts = len(case.hosts) if case.hosts is not None else ours.count(case.text)
                progress(f"{case.name} ({hosts} hosts)")
                grid.run_case(case, hosts)
    finally:
        if grid.scontrol:
            grid.scontrol.close()
    for size in ("10k", "100k"):
        if size in sizes:
            progress(f"expand multi-bracket {size}, side by side with python-hostlist")
            grid.rows.append(grid.side_by_side(size))
    if not args.no_memory:
        progress("peak memory")
        row = grid.memory()
        grid.rows.append(row)
        times = (row.ours or 0.0) / row.anchors[FLOOR]
        grid.checks.append((f"{row.case}: {times:.2f}x the list it returns <= 1.5x", times <= 1.5))
        progress("peak memory of sorted compress")
        row = sorted_names_memory()
        grid.rows.append(row)
        times = (row.ours or 0.0) / row.anchors[FLOOR]
        grid.checks.append(
            (f"{row.case}: {times:.2f}x unsorted <= {SORTED_MEMORY_MOST:g}x", times <= SORTED_MEMORY_MOST)
        )
    lines, checks = grid.growth()
    skipped = sorted({(a, why) for row in grid.rows for a, why in row.skipped.items()})
    notes += [f"skipped {anchor}: {why}" for anchor, why in skipped]
    if any(row.marks for row in grid.rows):
        notes.append(
            f"{SORTED_MARK} same hosts in another order or form (the anchor sorts, or folds n<i>-ib)"
        )
    return grid.rows, [*lines, *notes], grid.checks + checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--check", action="store_true", help="exit 1 if a check is missed")
    args = parser.parse_args()
    rows, lines, checks = run(args, lambda what: print(f"... {what}", file=sys.stderr, flush=True))
    ok = measure.report(rows, ANCHORS, lines, checks)
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
