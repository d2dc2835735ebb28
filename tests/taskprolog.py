"""Slurm's side of the TaskProlog protocol, for the tests: what slurmstepd makes of the
lines a TaskProlog prints.
"""

from __future__ import annotations

from tfslurm import prolog


def apply_taskprolog_output(env: dict[str, str], text: str) -> tuple[dict[str, str], list[str]]:
    """What slurmstepd does with a TaskProlog's stdout: ``export NAME=value`` (value taken
    literally to the end of the line, blanks before '=' dropped), ``unset NAME``,
    ``print text``; other lines ignored. Values of 131,072 bytes or more with the name are
    dropped, as ``setenvf`` does. Returns the new environment and the printed lines."""
    env = dict(env)
    printed = []
    for line in text.split("\n"):
        if line.startswith("print "):
            printed.append(line[6:].lstrip())
        elif line.startswith("export "):
            rest = line[7:].lstrip()
            if "=" not in rest:
                continue
            name, value = rest.split("=", 1)
            name = name.rstrip()
            if (
                len(name.encode()) + len(value.encode("utf-8", "surrogateescape")) + 2
                < prolog.SLURM_ENV_STRLEN_MAX
            ):
                env[name] = value
        elif line.startswith("unset "):
            name = line[6:].strip()
            if name:
                env.pop(name, None)
    return env, printed
