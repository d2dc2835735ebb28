"""Ask the real ``scontrol`` how Slurm expands and compresses hostlists.

``scontrol show hostnames|hostlist|hostlistsorted`` only needs a readable slurm.conf, no
daemons, so the oracle writes a minimal one to a temporary directory and points
``SLURM_CONF`` at it (outer ``SLURM_*`` variables are dropped). Many queries go through one
interactive ``scontrol`` process, separated by a marker, so thousands of cases take well
under a second; text that the interactive reader would mangle (blanks, quotes, ...) is
asked one process per query instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

_MARKER = "tfslurm-oracle-marker"
#: Answer where scontrol dies of a signal or does not finish in time (Slurm 22.05 does both
#: on ranges that reach 2**64 - 1).
CRASHED = "scontrol crashed or did not finish"
#: Answer for input scontrol complains about (``scontrol: error: ...``) yet does not reject:
#: 22.05 swallows errors in the third-from-last and earlier bracket groups and drops those
#: hosts silently (``_push_range_list`` keeps MAX(0, -1) as its status).
PARTIAL = "scontrol reported an error but printed a hostlist anyway"
# Text the interactive reader passes through untouched (readline would complete tabs,
# split blanks, expand history, ...). Everything else is asked through argv.
_BATCH_SAFE = re.compile(r"[A-Za-z0-9_.:\[\],-]+")
_CONF = """\
ClusterName=oracle
SlurmctldHost=localhost
NodeName=localhost CPUs=1 State=UNKNOWN
PartitionName=oracle Nodes=localhost Default=YES
"""


class _Crashed(RuntimeError):
    """scontrol died of a signal."""


@dataclass
class Scontrol:
    """A real ``scontrol`` binary plus the throwaway config it needs."""

    executable: str
    conf_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="tfslurm-oracle-"))
    queries: int = 0  # how many expressions/host lists were asked, for the test report

    def __post_init__(self) -> None:
        conf = os.path.join(self.conf_dir, "slurm.conf")
        with open(conf, "w", encoding="utf-8") as handle:
            handle.write(_CONF)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        self.env["SLURM_CONF"] = conf
        self.env.update(LC_ALL="C", TERM="dumb", COLUMNS="1000000", INPUTRC="/dev/null")

    @classmethod
    def find(cls) -> Scontrol | None:
        path = shutil.which("scontrol")
        return cls(path) if path else None

    def close(self) -> None:
        shutil.rmtree(self.conf_dir, ignore_errors=True)

    def version(self) -> str:
        done = subprocess.run(
            [self.executable, "--version"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return done.stdout.strip()

    # -- queries --------------------------------------------------------------------------

    def hostnames(self, exprs: Sequence[str]) -> list[list[str] | None]:
        """``scontrol show hostnames`` of each expression; None where Slurm rejects it."""
        return self._ask("hostnames", exprs)

    def hostlist(self, host_lists: Sequence[Sequence[str]], sort: bool = False) -> list[str | None]:
        """``scontrol show hostlist[sorted]`` of each comma-joined host list."""
        kind = "hostlistsorted" if sort else "hostlist"
        answers = self._ask(kind, [",".join(hosts) for hosts in host_lists])
        return [None if a is None else "\n".join(a) for a in answers]

    def hostnames_or_crash(self, expr: str, timeout: float = 3.0) -> list[str] | str | None:
        """``scontrol show hostnames`` of one expression in a process of its own: CRASHED
        where scontrol dies of a signal or runs past ``timeout`` seconds."""
        self.queries += 1
        try:
            return self._single("hostnames", expr, timeout)
        except subprocess.TimeoutExpired:
            return CRASHED
        except _Crashed:
            return CRASHED

    def _ask(self, kind: str, texts: Sequence[str]) -> list:
        self.queries += len(texts)
        # A leading separator is skipped by Slurm's parser and keeps '-x' from being
        # read as an option.
        texts = ["," + t if t.startswith("-") else t for t in texts]
        answers: list = [None] * len(texts)
        batch = [i for i, t in enumerate(texts) if _BATCH_SAFE.fullmatch(t)]
        for i in set(range(len(texts))) - set(batch):
            answers[i] = self._single(kind, texts[i])
        for start in range(0, len(batch), 2000):
            chunk = batch[start : start + 2000]
            for i, answer in zip(chunk, self._batch(kind, [texts[i] for i in chunk]), strict=True):
                answers[i] = answer
        return answers

    def _single(self, kind: str, text: str, timeout: float = 60) -> list[str] | None:
        done = subprocess.run(
            [self.executable, "show", kind, text],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,  # scontrol's exit status says nothing useful here; stderr does
        )
        if done.returncode < 0:  # killed by a signal
            raise _Crashed(f"scontrol show {kind} {text!r}: signal {-done.returncode}")
        if "Invalid hostlist" in done.stderr or "too many arguments" in done.stderr:
            return None
        if done.stderr.startswith("scontrol: error: _parse_single_range"):
            return PARTIAL  # type: ignore[return-value]
        if done.stderr.strip() or done.returncode:
            raise RuntimeError(
                f"scontrol show {kind} {text!r}: exit status {done.returncode}, {done.stderr!r}"
            )
        return done.stdout.splitlines()

    def _batch(self, kind: str, texts: Sequence[str]) -> list[list[str] | None]:
        script = "".join(f"show {kind} {t}\nshow hostlist {_MARKER}\n" for t in texts)
        # stdbuf keeps stdout and stderr lines in the order scontrol wrote them.
        argv = [self.executable]
        stdbuf = shutil.which("stdbuf")
        if stdbuf:
            argv = [stdbuf, "-o0", "-e0", *argv]
        done = subprocess.run(
            argv,
            input=script,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
            check=False,
        )
        blocks: list[list[str]] = [[]]
        for line in done.stdout.splitlines():
            if line == _MARKER:
                blocks.append([])
            elif "scontrol: " in line and not line.startswith("scontrol: error:"):
                continue  # the reader's echo of a command (may carry terminal escapes)
            else:
                blocks[-1].append(line)
        if len(blocks) != len(texts) + 1:
            raise RuntimeError(
                f"scontrol answered {len(blocks) - 1} of {len(texts)} batched queries "
                f"(exit status {done.returncode}; a crash on the next query?)"
            )
        answers: list[list[str] | None] = []
        for block in blocks[:-1]:
            if any(line.startswith("Invalid hostlist") for line in block):
                answers.append(None)
            elif any(line.startswith("scontrol: error: _parse_single_range") for line in block):
                answers.append(PARTIAL)  # type: ignore[arg-type]
            elif any(line.startswith("scontrol:") for line in block):
                raise RuntimeError(f"unexpected scontrol output {block!r}")
            else:
                answers.append(block)
        return answers
