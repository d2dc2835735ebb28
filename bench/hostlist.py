"""Benchmark tfslurm.hostlist against python-hostlist and Slurm's own scontrol.

Every figure is measured in this one run (best of several repetitions), so the ratios
compare like with like on whatever machine runs it. Targets:

* expand ``n[1-50000],n[50001-100000]`` at least 3x faster than python-hostlist;
* compress 100k hosts (sorted and shuffled) at least 3x faster than python-hostlist's
  ``collect_hostlist`` (which sorts; tfslurm is timed with and without ``sort=True``);
* linear growth: expanding 100k bracket-free hosts within 12x of 10k.

scontrol times include starting the process and reading the input (arguments, or
standard input for text over the 128 KiB argument limit); the row "scontrol start-up"
shows that fixed cost. Run: ``python bench/hostlist.py`` (``--check`` exits 1 when a
target is missed). Needs python-hostlist (test extra); scontrol is optional.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from tfslurm import hostlist as ours

# This file is itself named hostlist.py: drop its directory from the import path so that
# `import hostlist` finds python-hostlist (GPL; a benchmark/test oracle only).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.modules.pop("hostlist", None)
try:
    import hostlist as python_hostlist
except ImportError:  # pragma: no cover - reported in main()
    python_hostlist = None

ARG_LIMIT = 128 * 1024


def best_of(function: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


class Scontrol:
    """Times ``scontrol show <kind> <text>`` with a throwaway minimal slurm.conf."""

    def __init__(self) -> None:
        self.path = shutil.which("scontrol")
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
        if len(text) < ARG_LIMIT:
            done = subprocess.run(
                [self.path, "show", kind, text],
                env=self.env,
                capture_output=True,
                text=True,
                check=True,
            )
            return done.stdout
        done = subprocess.run(
            [self.path],
            input=f"show {kind} {text}\n",
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        return (
            "\n".join(
                line for line in done.stdout.splitlines() if "scontrol: " not in line
            )
            + "\n"
        )

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="repetitions per figure (best is kept)"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a target is missed"
    )
    parser.add_argument(
        "--no-scontrol", action="store_true", help="skip the scontrol column"
    )
    args = parser.parse_args()
    if python_hostlist is None:
        print(
            "python-hostlist is not installed: pip install python-hostlist",
            file=sys.stderr,
        )
        return 2
    scontrol = None if args.no_scontrol or not shutil.which("scontrol") else Scontrol()

    ranged = "n[1-50000],n[50001-100000]"
    flat_10k = ",".join(f"n{i}" for i in range(10_000))
    flat_100k = ",".join(f"n{i}" for i in range(100_000))
    sorted_hosts = [f"n{i}" for i in range(100_000)]
    shuffled_hosts = sorted_hosts[:]
    random.Random(42).shuffle(shuffled_hosts)

    # Same answers first, so the timings compare equal work.
    assert ours.expand(ranged) == python_hostlist.expand_hostlist(
        ranged, allow_duplicates=True
    )
    assert ours.expand(flat_10k) == python_hostlist.expand_hostlist(
        flat_10k, allow_duplicates=True
    )
    assert ours.compress(shuffled_hosts, sort=True) == python_hostlist.collect_hostlist(
        shuffled_hosts
    )
    if scontrol:
        assert scontrol.run("hostnames", ranged).split() == ours.expand(ranged)
        assert scontrol.run(
            "hostlist", ",".join(shuffled_hosts[:5000])
        ).strip() == ours.compress(shuffled_hosts[:5000])

    rows: list[tuple[str, float | None, float | None, float | None]] = []
    slow = max(1, args.repeat // 2)

    def row(name: str, mine: Callable[[], object], theirs: Callable[[], object] | None,
            slurm: Callable[[], object] | None) -> float:  # fmt: skip
        t_ours = best_of(mine, args.repeat)
        t_ph = best_of(theirs, slow) if theirs else None
        t_sc = best_of(slurm, slow) if slurm else None
        rows.append((name, t_ours, t_ph, t_sc))
        return t_ours

    ph_expand = python_hostlist.expand_hostlist
    sc = scontrol
    row("expand n[1-50000],n[50001-100000]", lambda: ours.expand(ranged),
        lambda: ph_expand(ranged, allow_duplicates=True), sc and (lambda: sc.run("hostnames", ranged)))  # fmt: skip
    t10 = row("expand 10k bracket-free", lambda: ours.expand(flat_10k),
              lambda: ph_expand(flat_10k, allow_duplicates=True),
              sc and (lambda: sc.run("hostnames", flat_10k)))  # fmt: skip
    t100 = row("expand 100k bracket-free", lambda: ours.expand(flat_100k),
               lambda: ph_expand(flat_100k, allow_duplicates=True),
               sc and (lambda: sc.run("hostnames", flat_100k)))  # fmt: skip
    sc10 = rows[-2][3]
    sc100 = rows[-1][3]
    # The growth floor of this machine: CPython's own str.split of the same texts (every
    # expansion ends in creating one string object per host), and the same 100k hosts
    # made as ten 10k expansions kept alive (equal memory footprint).
    split_growth = best_of(lambda: flat_100k.split(","), args.repeat) / best_of(
        lambda: flat_10k.split(","), args.repeat
    )
    tenths = [
        ",".join(f"n{i}" for i in range(k * 10_000, (k + 1) * 10_000))
        for k in range(10)
    ]
    matched_growth = t100 / (
        best_of(lambda: [ours.expand(t) for t in tenths], args.repeat) / 10
    )
    compressed = ours.compress(shuffled_hosts)  # what Slurm writes for scattered hosts
    row("expand compress(100k shuffled)", lambda: ours.expand(compressed),
        lambda: ph_expand(compressed, allow_duplicates=True),
        sc and (lambda: sc.run("hostnames", compressed)))  # fmt: skip
    for label, hosts in (("sorted", sorted_hosts), ("shuffled", shuffled_hosts)):
        text = ",".join(hosts)
        row(f"compress 100k {label}", lambda h=hosts: ours.compress(h),
            lambda h=hosts: python_hostlist.collect_hostlist(h),
            sc and (lambda t=text: sc.run("hostlist", t)))  # fmt: skip
        row(f"compress 100k {label}, sort=True", lambda h=hosts: ours.compress(h, sort=True),
            lambda h=hosts: python_hostlist.collect_hostlist(h),
            sc and (lambda t=text: sc.run("hostlistsorted", t)))  # fmt: skip
    if sc:
        rows.append(("scontrol start-up (show hostnames n1)", None, None,
                     best_of(lambda: sc.run("hostnames", "n1"), slow)))  # fmt: skip

    def cell(seconds: float | None, mine: float | None) -> str:
        if seconds is None:
            return f"{'-':>22}"
        if mine is None:  # no tfslurm figure in this row
            return f"{seconds * 1000:10.1f} ms{'':>10}"
        return f"{seconds * 1000:10.1f} ms ({seconds / mine:5.1f}x)"

    print(f"{'case':<42}{'tfslurm':>12}{'python-hostlist':>24}{'scontrol':>24}")
    for name, mine, theirs, slurm in rows:
        mine_text = "-" if mine is None else f"{mine * 1000:.1f} ms"
        print(f"{name:<42}{mine_text:>12}{cell(theirs, mine)}{cell(slurm, mine)}")
    print("(x = how many times longer than tfslurm)")

    ratio = {
        name: (theirs / mine if theirs else 0.0)
        for name, mine, theirs, _ in rows
        if mine
    }
    growth = t100 / t10
    checks = [
        ("expand ranged >= 3x python-hostlist", ratio["expand n[1-50000],n[50001-100000]"] >= 3),
        ("compress 100k sorted >= 3x", ratio["compress 100k sorted"] >= 3),
        ("compress 100k shuffled >= 3x", ratio["compress 100k shuffled"] >= 3),
        ("compress 100k sorted, sort=True >= 3x", ratio["compress 100k sorted, sort=True"] >= 3),
        ("compress 100k shuffled, sort=True >= 3x", ratio["compress 100k shuffled, sort=True"] >= 3),
        ((f"100k bracket-free within 12x of 10k (is {growth:.1f}x; str.split alone grows "
          f"{split_growth:.1f}x here; {matched_growth:.1f}x against ten 10k lists kept alive)"),
         growth <= 12),
    ]  # fmt: skip
    if sc10 and sc100:
        print(f"scontrol growth 10k -> 100k bracket-free: {sc100 / sc10:.1f}x")
    for label, ok in checks:
        print(f"{'PASS' if ok else 'MISS'}  {label}")
    if scontrol:
        scontrol.close()
    return 1 if args.check and not all(ok for _, ok in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
