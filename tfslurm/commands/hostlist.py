"""``tfslurm hostlist expand|compress|count``: Slurm hostlists from the shell.

The results are those of ``scontrol show hostnames|hostlist|hostlistsorted``, without
needing a Slurm installation (see ``docs/hostlist.md``).
"""

from __future__ import annotations

import argparse
import sys

from tfslurm import hostlist
from tfslurm.errors import HostlistError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    expand = sub.add_parser(
        "expand",
        help="print every host, one per line, in Slurm's order (duplicates kept)",
        description="Print every host of EXPR, one per line (or joined by --delimiter).",
    )
    expand.add_argument("expr", metavar="EXPR", help="a hostlist such as 'rack[1-2]-n[01-02]'")
    expand.add_argument(
        "-d",
        "--delimiter",
        default="\n",
        help="text between hosts (default: a newline)",
    )
    compress = sub.add_parser(
        "compress",
        help="print the compressed hostlist (as scontrol show hostlist)",
        description=(
            "Print the hostlist Slurm writes for these hosts: order and duplicates kept, "
            "like 'scontrol show hostlist' (--sorted: 'scontrol show hostlistsorted'). "
            "Hosts come from the arguments or, without arguments, from standard input "
            "(separated by newlines, blanks or commas; bracket expressions are expanded)."
        ),
    )
    compress.add_argument("hosts", metavar="HOST", nargs="*", help="host names or hostlists")
    compress.add_argument("--sorted", action="store_true", help="sort first (hostlistsorted)")
    count = sub.add_parser("count", help="print how many hosts EXPR has")
    count.add_argument("expr", metavar="EXPR", help="a hostlist")


def run(args: argparse.Namespace) -> int:
    if args.action == "expand":
        hosts = hostlist.expand(args.expr)
        if hosts:
            sys.stdout.write(args.delimiter.join(hosts) + "\n")
    elif args.action == "compress":
        if args.hosts:
            text = ",".join(args.hosts)
        elif sys.stdin is None:
            raise HostlistError("no HOST arguments and no standard input to read hosts from")
        else:  # read no more than expand() accepts, however much is piped in
            text = sys.stdin.read(hostlist.MAX_CHARS + 1)
            if len(text) > hostlist.MAX_CHARS:
                raise HostlistError(
                    f"standard input is longer than {hostlist.MAX_CHARS} characters (tfslurm's bound)"
                )
        # lines of input are items, though a newline inside one expression is an error
        text = text.replace("\n", ",")
        print(hostlist.compress(hostlist.expand(text), sort=args.sorted))
    else:
        print(hostlist.count(args.expr))
    return 0
