"""A finding of ``tfslurm doctor``, and the report they make.

A finding names its check, the nodes it concerns, what is wrong and the fix. Findings that
say the same thing of several nodes are one line naming them all (a hostlist), so a fault of
every node is one line, not one per node.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tfslurm import hostlist
from tfslurm.errors import HostlistError, one_line
from tfslurm.hostlist.natural import natural_sorted
from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Final

#: Exit statuses: nothing found, at least one finding (bad usage is EXIT_USAGE, 2).
EXIT_HEALTHY = 0
EXIT_FINDING = 1

#: The checks, in the order the report lists them.
CHECKS = (
    "slurm",
    "plugin",
    "version",
    "wrapper",
    "allocation",
    "node",
    "port",
    "name",
    "reach",
    "gpus",
    "framework",
    "container",
    "clock",
    "cwd",
)


class Finding(Value):
    """``check`` found ``message`` on ``nodes``; ``fix`` says what to do."""

    __slots__ = ("check", "fix", "message", "nodes")
    __match_args__ = ("check", "nodes", "message", "fix")

    def __init__(self, check: str, nodes: Sequence[str], message: str, fix: str) -> None:
        self.check: Final = check
        self.nodes: Final = tuple(nodes)
        self.message: Final = message
        self.fix: Final = fix

    def as_dict(self) -> dict[str, object]:
        return {"check": self.check, "nodes": list(self.nodes), "message": self.message, "fix": self.fix}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Finding:
        nodes = data.get("nodes")
        return cls(
            str(data.get("check", "")),
            [str(n) for n in nodes] if isinstance(nodes, list) else [],
            str(data.get("message", "")),
            str(data.get("fix", "")),
        )

    def line(self) -> str:
        """One line: check, nodes, what is wrong, the fix (each part escaped)."""
        where = f" {node_list(self.nodes)}:" if self.nodes else ""
        return one_line(f"{self.check}:{where} {self.message}; fix: {self.fix}", 1000)


def node_list(nodes: Sequence[str]) -> str:
    """``nodes`` as a hostlist (``node[1-3]``), or joined by commas where they are not names
    a hostlist can hold."""
    try:
        return hostlist.compress(list(nodes))
    except HostlistError:
        return ",".join(nodes)


def merged(findings: Iterable[Finding]) -> list[Finding]:
    """The same finding of several nodes as one, naming them all, in :data:`CHECKS` order."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for finding in findings:
        nodes = groups.setdefault((finding.check, finding.message, finding.fix), [])
        nodes.extend(n for n in finding.nodes if n not in nodes)
    order = {check: i for i, check in enumerate(CHECKS)}
    keys = sorted(groups, key=lambda key: order.get(key[0], len(CHECKS)))
    return [
        Finding(check, _natural(groups[(check, message, fix)]), message, fix) for check, message, fix in keys
    ]


def _natural(nodes: list[str]) -> list[str]:
    return natural_sorted(nodes)


class Report(Value):
    """What one ``tfslurm doctor`` run found, and what it checked (short texts)."""

    __slots__ = ("checked", "findings")
    __match_args__ = ("findings", "checked")

    def __init__(self, findings: Iterable[Finding] = (), checked: Iterable[str] = ()) -> None:
        self.findings: Final = tuple(merged(findings))
        self.checked: Final = tuple(dict.fromkeys(checked))

    def plus(self, other: Report) -> Report:
        return Report((*self.findings, *other.findings), (*self.checked, *other.checked))

    @property
    def status(self) -> int:
        return EXIT_FINDING if self.findings else EXIT_HEALTHY

    def as_json(self) -> str:
        return json.dumps({"findings": [f.as_dict() for f in self.findings], "checked": list(self.checked)})

    @classmethod
    def from_json(cls, text: str) -> Report:
        """A report printed by ``--json`` (another run's: ``--submit`` reads its job's)."""
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
            raise ValueError("not a tfslurm doctor report")
        findings = [Finding.from_dict(f) for f in data["findings"] if isinstance(f, dict)]
        checked = data.get("checked")
        return cls(findings, [str(c) for c in checked] if isinstance(checked, list) else [])

    def text(self) -> str:
        """One line per finding; healthy: one summary line of what was checked."""
        if self.findings:
            return "\n".join(f.line() for f in self.findings)
        return one_line(
            f"tfslurm doctor: healthy ({len(self.checked)} checks: {'; '.join(self.checked)})", 4000
        )
