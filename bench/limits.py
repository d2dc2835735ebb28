"""Timing of inputs at tfslurm's limits, the figures the unit tests leave out (they assert
what the answers are, never how long they take).

    python bench/limits.py [--repeat 3] [--check]

Rows, each against a named anchor measured in the same run (best of ``--repeat`` rounds
run in turns, see ``bench/measure.py``); the ratio is anchor / tfslurm (> 1: tfslurm is
faster):

* ``count`` of ``MAX_HOSTS`` (1,048,576) bracket-free hosts (``n,n,...`` and ``n[1],n,...``) against
  ``expand`` of the same text: one split, so count stays near expand (least 0.05x);
* sorted ``compress`` of 700,000 names without a numeric tail against unsorted
  ``compress`` of the same names and the CPython floor (``str.join``); shown, not checked;
* refusing ``é[000000000000000000086-0770][1134][000000000000000000218-643]`` (past the
  64-bit limit) against ``expand`` of a valid 500,000-host expression of the same shape:
  the limit is found without expanding, so the refusal costs a small part (least 10x);
* ``count_visible_gpus`` giving up on an ``nvidia-smi`` that hangs, against its timeout
  (0.5 s): it returns soon after the timeout, not when the program ends (least 0.1x).

``--check``: exit 1 when a least ratio is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from tfslurm import hostlist
from tfslurm.errors import HostlistError
from tfslurm.gpus.probes import count_visible_gpus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/measure.py
import measure
from measure import FLOOR, Row

HANG_TIMEOUT = 0.5
OVER_64_BITS = "é[000000000000000000086-0770][1134][000000000000000000218-643]"
SAME_SHAPE_VALID = "n[000000000000000000001-5000][00-99]"


def count_rows(repeat: int) -> list[Row]:
    rows = []
    many = hostlist.MAX_HOSTS
    for label, text in (
        ("n,n,...", "n," * (many - 1) + "n"),
        ("n[1],n,...", "n[1]," + "n," * (many - 2) + "n"),
    ):
        best = measure.interleaved(
            {"count": lambda t=text: hostlist.count(t), "expand": lambda t=text: hostlist.expand(t)}, repeat
        )
        rows.append(
            Row(
                f"count {many:,} hosts {label}",
                best["count"],
                {"expand": best["expand"]},
                least={"expand": 0.05},
            )
        )
    return rows


def sorted_compress_row(repeat: int) -> Row:
    hosts = hostlist.expand("h[1-700]x[1-1000]J")
    best = measure.interleaved(
        {
            "sorted": lambda: hostlist.compress(hosts, sort=True),
            "unsorted": lambda: hostlist.compress(hosts),
            FLOOR: lambda: ",".join(hosts),
        },
        repeat,
        budget=30.0,
    )
    return Row(
        f"compress sort=True, {len(hosts):,} names without a number",
        best["sorted"],
        {"compress unsorted": best["unsorted"], FLOOR: best[FLOOR]},
    )


def refuse_row(repeat: int) -> Row:
    def refuse() -> None:
        try:
            hostlist.count(OVER_64_BITS)
        except HostlistError:
            return
        raise AssertionError(f"{OVER_64_BITS!r} was not refused")

    best = measure.interleaved({"refuse": refuse, "valid": lambda: hostlist.expand(SAME_SHAPE_VALID)}, repeat)
    return Row(
        "refuse a 64-bit overflow in a multi-group tail",
        best["refuse"],
        {"expand 500,000 hosts": best["valid"]},
        least={"expand 500,000 hosts": 10.0},
    )


def hang_row() -> Row:
    with tempfile.TemporaryDirectory() as where:
        smi = os.path.join(where, "nvidia-smi")
        with open(smi, "w") as f:
            f.write("#!/bin/sh\nexec sleep 30\n")
        os.chmod(smi, 0o755)
        start = time.perf_counter()
        count_visible_gpus(timeout=HANG_TIMEOUT, executable=smi)
        took = time.perf_counter() - start
    return Row(
        "count_visible_gpus on a hanging nvidia-smi",
        took,
        {"its timeout": HANG_TIMEOUT},
        least={"its timeout": 0.1},
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="exit 1 when a least ratio is missed")
    args = parser.parse_args()
    rows = [*count_rows(args.repeat), sorted_compress_row(args.repeat), refuse_row(args.repeat), hang_row()]
    ok = measure.report(rows, ["expand"], [], [])
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
