"""``tfslurm layout``: print the verified rank -> node map of the current step."""

from __future__ import annotations

import argparse
import json
import sys

from tfslurm.layout import layout_for
from tfslurm.step import Step


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help='print a JSON object: "rank_to_node" (element r = node of rank r), '
        '"rank_to_local", "nodes", "method", "num_tasks", "rank" (this task), "component_sizes"',
    )


def run(args: argparse.Namespace) -> int:
    step = Step.from_environ()
    layout = layout_for(step)
    if args.json:
        document = {
            "rank_to_node": layout.rank_to_node,
            "rank_to_local": list(layout.rank_local),
            "nodes": list(layout.nodes),
            "method": layout.method,
            "num_tasks": layout.num_tasks,
            "rank": step.procid,
            "component_sizes": list(layout.component_sizes),
        }
        json.dump(document, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        print(
            f"# step {step.job_id}.{step.step_id}: {layout.num_tasks} tasks on "
            f"{len(layout.nodes)} nodes, {layout.method} layout"
        )
        print(layout.table())
    return 0
