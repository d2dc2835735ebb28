"""Every ``tfslurm`` subcommand answers bad input alike: one line on stderr, exit status 2,
no traceback, whether argparse or the command itself finds the mistake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import tfslurm_cli
from tfslurm.cli import COMMANDS
from tfslurm.commands.requeue import JOB_IDS
from tfslurm.commands.template import NAMES
from tfslurm.runtime import exits

ROOT = Path(__file__).resolve().parents[1]
# `eval "$(tfslurm ...)"`: its status is eval's, 0 when tfslurm failed, and nothing is set.
HIDDEN_FAILURE = re.compile(r'eval\s+"?\$\(\s*"?(?:\$\{?TFSLURM\b|[\w./-]*tfslurm\s)')

# Bad input each command finds itself (argparse's own errors are the cases below).
# "{tmp}" is a fresh directory of the test.
BAD_INPUT: list[tuple[str, ...]] = [
    ("hostlist", "expand", "n[3-1]"),
    ("hostlist", "count", "n[1-"),
    ("layout",),  # outside a job step
    ("plan",),
    ("tf-config",),
    ("tf-config", "--port-base", "70000"),
    ("env",),
    ("env", "--gpus-per-task", "-1"),
    ("env", "--for", "nope"),
    ("prolog", "--write-wrapper", "{tmp}/missing/wrapper.sh"),
    ("prolog", "--print-wrapper", "--python", "python-not-installed-anywhere"),
    ("run", "--max-restarts", "abc", "--", "true"),
    ("run", "--peer-timeout", "-1", "--", "true"),
    ("supervise", "--batch-per-worker", "0", "--", "srun", "true"),
    ("supervise",),  # no command
    ("requeue",),  # outside a job, no JOB
    ("requeue", "abc"),
    ("requeue", "1234; scancel 1"),
    ("requeue", "--hold", "1234_"),
    ("requeue", "12", "13"),  # one JOB (several: 12,13)
    ("cluster", "status", "--state", "{tmp}/missing"),
    ("cluster", "status", "--state", "{tmp}/file"),  # a file, not a state dir
    ("cluster", "status", "extra"),
    ("cluster", "up", "--nodes", "0", "--state", "{tmp}/state"),
    ("demo", "--nodes", "0"),
    ("template", "nope"),
    ("template",),  # no NAME
    ("template", "--list", "mwms"),
    ("template", "mwms", "{tmp}/file"),  # exists, no --force
    ("template", "ps", "{tmp}/missing/ps.sbatch"),
    ("doctor", "--framework", "tensorflow,nope"),
    ("doctor", "--node-check", "127.0.0.1:1"),  # the step's own tasks only
    ("doctor", "extra", "options"),  # sbatch options without --submit
]


def _one_usage_error(args: tuple[str, ...], tmp: Path, env: dict[str, str] | None = None) -> None:
    (tmp / "file").write_text("not a cluster record\n")
    done = tfslurm_cli(*(a.replace("{tmp}", str(tmp)) for a in args), env=env)
    assert done.returncode == 2, (args, done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, (args, done.stderr)
    assert lines[0].startswith("tfslurm") and "error: " in lines[0], lines
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("args", BAD_INPUT, ids=" ".join)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], tmp_path: Path) -> None:
    _one_usage_error(args, tmp_path)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_option_is_one_line_and_exit_2(command: str, tmp_path: Path) -> None:
    _one_usage_error((command, "--no-such-option"), tmp_path)


@pytest.mark.parametrize(
    ("command", "words"),
    [("requeue", "12 13"), ("cluster status", "extra"), ("hostlist expand", "n1 -x"), ("layout", "x")],
)
def test_an_unknown_word_is_refused_by_its_own_command(command: str, words: str) -> None:
    done = tfslurm_cli(*command.split(), *words.split())
    assert done.returncode == 2, done.stderr
    unknown = words.split()[-1]
    assert (
        done.stderr
        == f"tfslurm {command}: error: unrecognized arguments: {unknown} (see tfslurm {command} --help)\n"
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("tf-config", "--port-base", "70000"),
            "argument --port-base: '70000' is not a port: give one of 1..65535",
        ),
        (("plan", "--port-base", "8k"), "argument --port-base: '8k' is not a port: give one of 1..65535"),
        (
            ("env", "--gpus-per-task", "-1"),
            "argument --gpus-per-task: '-1' is not a GPU count: give one of 0..4096",
        ),
    ],
)
def test_a_malformed_number_names_its_option(args: tuple[str, ...], line: str) -> None:
    done = tfslurm_cli(*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"tfslurm {args[0]}: error: {line} (see tfslurm {args[0]} --help)\n"


def test_every_command_has_a_bad_input_case() -> None:
    assert {args[0] for args in BAD_INPUT} == set(COMMANDS)


def test_requeue_names_a_malformed_job_of_the_environment(tmp_path: Path) -> None:
    _one_usage_error(("requeue",), tmp_path, env={"SLURM_JOB_ID": "12x"})
    done = tfslurm_cli("requeue", env={"SLURM_JOB_ID": "12x"})
    assert "SLURM_JOB_ID" in done.stderr and "'12x'" in done.stderr


def test_requeue_says_its_reason_on_one_line(tmp_path: Path) -> None:
    """No scontrol on PATH (and pyslurm not asked): the refusal (exit 1) comes after the line."""
    env = {"PATH": str(tmp_path), "TFSLURM_CONTROLLER": "commands"}
    done = tfslurm_cli("requeue", "--reason", "pre\nempted", "1234", env=env)
    assert done.stdout == "tfslurm: requeueing job 1234 (pre\\nempted)\n"
    assert done.returncode == 1 and done.stderr.startswith(
        "tfslurm requeue: error: scontrol not found on PATH"
    )


@pytest.mark.parametrize("job", ["1234", "1234_7", "1234_[1-3,5]", "1234_*", "1234+1", "12,13_2"])
def test_requeue_takes_every_form_of_job_id_scontrol_takes(job: str) -> None:
    assert JOB_IDS.fullmatch(job)


@pytest.mark.parametrize("job", ["abc", "1234_", "12 13", "-1", "1234.0", "1234_[a]", "12,", "$SLURM_JOB_ID"])
def test_requeue_refuses_what_is_no_job_id(job: str) -> None:
    assert not JOB_IDS.fullmatch(job)


def test_template_writes_the_shipped_text(tmp_path: Path) -> None:
    """NAME.sbatch in the current directory by default, DEST or DEST/NAME.sbatch otherwise."""
    shipped = {name: (ROOT / "sbatch_templates" / f"{name}.sbatch").read_text() for name in ("mwms", "ps")}
    (tmp_path / "dir").mkdir()
    for args, written, name in [
        (("mwms",), tmp_path / "mwms.sbatch", "mwms"),
        (("ps.sbatch", "job.sh"), tmp_path / "job.sh", "ps"),
        (("ps", "dir"), tmp_path / "dir" / "ps.sbatch", "ps"),
    ]:
        done = tfslurm_cli("template", *args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert written.read_text() == shipped[name]
        shown = written.relative_to(tmp_path)
        assert done.stdout == f"wrote {shown} (submit it: sbatch {shown} [PROGRAM [ARGS...]])\n"


def test_template_keeps_an_existing_file_unless_forced(tmp_path: Path) -> None:
    dest = tmp_path / "mwms.sbatch"
    dest.write_text("my own job\n")
    done = tfslurm_cli("template", "mwms", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "tfslurm template: error: 'mwms.sbatch' exists; give --force to overwrite it\n"
    assert dest.read_text() == "my own job\n"
    done = tfslurm_cli("template", "mwms", "--force", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert dest.read_text() == (ROOT / "sbatch_templates" / "mwms.sbatch").read_text()


def test_template_unknown_name_lists_the_names() -> None:
    done = tfslurm_cli("template", "mwm")
    assert done.returncode == 2
    assert done.stderr == f"tfslurm template: error: no template 'mwm'; the templates: {', '.join(NAMES)}\n"


def test_template_list_names_every_shipped_template() -> None:
    done = tfslurm_cli("template", "--list")
    assert done.returncode == 0, done.stderr
    rows = [line.split(None, 1) for line in done.stdout.splitlines()]
    shipped = sorted(p.stem for p in (ROOT / "sbatch_templates").glob("*.sbatch"))
    assert sorted(name for name, _ in rows) == shipped
    described = dict(rows)
    assert described["mwms"] == "MultiWorkerMirroredStrategy (synchronous data-parallel training)."
    assert all(text and not text.startswith("#") for text in described.values())


def _exit_rows(command: str) -> dict[str, str]:
    """The rows of ``tfslurm COMMAND --help``'s ``exit status`` section: status -> meaning."""
    done = tfslurm_cli(command, "--help")
    assert done.returncode == 0, done.stderr
    _, found, section = done.stdout.partition("\nexit status:\n")
    assert found, done.stdout
    return dict(line.split(None, 1) for line in section.splitlines() if line.strip())


def test_every_exit_status_has_a_meaning() -> None:
    defined = {value for name, value in vars(exits).items() if name.startswith("EXIT_")}
    assert set(exits.MEANINGS) == defined


def test_run_help_lists_every_exit_status() -> None:
    rows = _exit_rows("run")
    assert rows.pop("other").startswith("the program's own status")
    assert rows == {str(status): meaning for status, meaning in exits.MEANINGS.items()}


def test_supervise_help_lists_its_exit_statuses() -> None:
    rows = _exit_rows("supervise")
    assert rows.pop("other").startswith("srun's status")
    assert rows == {str(status): exits.MEANINGS[status] for status in (exits.EXIT_USAGE, exits.EXIT_STOPPED)}


def _shown_to_users() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "sbatch_templates").iterdir()),
        *sorted((ROOT / "tfslurm").rglob("*.py")),
    ]


def test_no_example_evals_tfslurm_output_unchecked() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _shown_to_users()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HIDDEN_FAILURE.search(line)
    ]
    assert found == [], 'use: vars=$(tfslurm env) || exit; eval "$vars"'


@pytest.mark.parametrize(
    "line",
    [
        'eval "$(tfslurm env)"',
        "eval $(tfslurm env --for torch)",
        'eval "$("$TFSLURM" env)"',
        'eval "$(${TFSLURM} env)"',
        'eval "$(/opt/venv/bin/tfslurm cluster up)"',
    ],
)
def test_the_unchecked_eval_is_recognised(line: str) -> None:
    assert HIDDEN_FAILURE.search(line)


def test_the_checked_eval_is_not_flagged() -> None:
    assert not HIDDEN_FAILURE.search('vars=$(tfslurm env) || exit; eval "$vars"')
