"""The SPANK plugin's build, exported symbols, install, and its C spec parser.

The parser (``plugin/src/spec.c``) is checked three ways: the C unit tests, random and
hostile input under AddressSanitizer/UBSan and under valgrind, and a hypothesis
differential test against ``tfslurm/jobspec.py`` (the grammar the Python side applies in
every task). Loading the plugin into a real Slurm is in ``test_site_cluster.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from plugin_build import PLUGIN_DIR, PLUGIN_NAME, build_plugin, build_tools_missing, make
from tfslurm import plan as plan_module
from tfslurm.errors import JobSpecError, PlanError
from tfslurm.jobspec import parse_jobs, split_spec

# What Slurm's loader looks up; everything else must be hidden.
EXPORTED = {
    "plugin_name",
    "plugin_type",
    "plugin_version",
    "spank_plugin_version",
    "slurm_spank_init",
    "slurm_spank_user_init",
    "slurm_spank_task_init_privileged",
    "slurm_spank_task_init",
}
# Slurm 25.05+ also reads slurm_spank_init_failure_mode (fail the job, not drain the node).
FAILURE_MODE_FROM = 0x190500  # SLURM_VERSION_NUM(25, 5, 0)


def exported_for_installed_slurm() -> set[str]:
    """EXPORTED, plus the failure mode where the installed spank.h's Slurm has it."""
    header = Path("/usr/include/slurm/slurm_version.h")
    number = int(header.read_text().split("SLURM_VERSION_NUMBER")[1].split()[0], 16) if header.exists() else 0
    return EXPORTED | ({"slurm_spank_init_failure_mode"} if number >= FAILURE_MODE_FROM else set())


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = build_tools_missing()
    if missing:
        pytest.skip(f"cannot build the plugin: {missing}")
    out = tmp_path_factory.mktemp("plugin-build")
    build_plugin(out)
    done = make(out, str(out / "spec_test"))
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_builds_without_warnings(tmp_path: Path) -> None:
    missing = build_tools_missing()
    if missing:
        pytest.skip(missing)
    in_tree = PLUGIN_DIR / "build"  # install.sh builds here; a test build must not touch it
    before = sorted((p.name, p.stat().st_mtime_ns) for p in in_tree.iterdir()) if in_tree.exists() else None
    done = make(tmp_path, "all", CFLAGS="-O2 -g -Werror")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stderr.lower()
    assert (tmp_path / PLUGIN_NAME).is_file()
    after = sorted((p.name, p.stat().st_mtime_ns) for p in in_tree.iterdir()) if in_tree.exists() else None
    assert after == before


def test_only_slurm_symbols_are_exported(build_dir: Path) -> None:
    listing = subprocess.run(
        ["nm", "-D", "--defined-only", str(build_dir / PLUGIN_NAME)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    names = {line.split()[-1] for line in listing.splitlines() if line.strip()}
    names = {n for n in names if not n.startswith("_")}  # _init/_fini and linker symbols
    assert names == exported_for_installed_slurm()
    # the Makefile's own check agrees
    done = make(build_dir, "check-symbols")
    assert done.returncode == 0 and "exported symbols OK" in done.stdout, done.stdout + done.stderr


def test_plugin_is_built_hardened(build_dir: Path) -> None:
    """Loaded into slurmstepd as root: RELRO + BIND_NOW, a non-executable stack, and the
    stack protector and _FORTIFY_SOURCE checks compiled in (as pyxis builds its plugin)."""
    done = make(build_dir, "check-hardening")
    assert done.returncode == 0 and "hardening OK" in done.stdout, done.stdout + done.stderr
    symbols = subprocess.run(
        ["nm", "-D", "--undefined-only", str(build_dir / PLUGIN_NAME)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    used = {line.split()[-1].split("@")[0] for line in symbols.splitlines() if line.strip()}
    assert "__stack_chk_fail" in used, sorted(used)
    assert any(name.endswith("_chk") and name != "__stack_chk_fail" for name in used), sorted(used)


def test_plugin_identifies_itself_to_slurm(build_dir: Path) -> None:
    """plugin_type must be "spank" and plugin_version this Slurm's, or Slurm refuses it."""
    data = subprocess.run(
        ["nm", "-D", "--defined-only", str(build_dir / PLUGIN_NAME)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    kinds = {line.split()[-1]: line.split()[-2] for line in data.splitlines()}
    assert kinds["plugin_name"] in "RrDd" and kinds["slurm_spank_init"] in "Tt"
    strings = subprocess.run(["strings", str(build_dir / PLUGIN_NAME)], capture_output=True, text=True).stdout
    assert "tfslurm" in strings and "spank" in strings
    # The values themselves, read from the file (loading it needs slurmd's symbols).
    if shutil.which("objdump") is None:
        pytest.skip("objdump not found (binutils)")
    so = build_dir / PLUGIN_NAME
    assert exported_bytes(so, "plugin_name") == b"tfslurm\0"
    assert exported_bytes(so, "plugin_type") == b"spank\0"
    assert exported_uint(so, "spank_plugin_version") == 1
    header = Path("/usr/include/slurm/slurm_version.h").read_text()
    (number,) = re.findall(r"^#define SLURM_VERSION_NUMBER (0x[0-9a-fA-F]+)$", header, re.MULTILINE)
    assert exported_uint(so, "plugin_version") == int(number, 16)


def exported_bytes(so: Path, name: str) -> bytes:
    """The bytes of the exported read-only object ``name`` in the shared object ``so``."""
    table = subprocess.run(
        ["nm", "-D", "-S", "--defined-only", str(so)], capture_output=True, text=True, check=True
    ).stdout
    ((address, size),) = [
        (int(f[0], 16), int(f[1], 16))
        for f in map(str.split, table.splitlines())
        if len(f) == 4 and f[3] == name
    ]
    dump = subprocess.run(
        ["objdump", "-s", "-j", ".rodata", f"--start-address={address}", f"--stop-address={address + size}", str(so)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    data = b""
    for line in dump.splitlines():
        # " 6010 7466736c 75726d00      tfslurm." : address, hex groups, then the text
        words = line.strip().split("  ")[0].split()
        if len(words) > 1 and all(w.isalnum() and len(w) % 2 == 0 for w in words[1:]):
            data += bytes.fromhex("".join(words[1:]))
    assert len(data) == size, dump
    return data


def exported_uint(so: Path, name: str) -> int:
    return int.from_bytes(exported_bytes(so, name), sys.byteorder)


def test_c_unit_tests_pass(build_dir: Path) -> None:
    done = subprocess.run([str(build_dir / "spec_test"), "unit"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert "all cases passed" in done.stdout


def test_parser_under_address_sanitizer(tmp_path: Path) -> None:
    """Hostile input (long, empty, non-ASCII, separators, newlines, unterminated buffers)
    and 100,000 random inputs, each in a heap buffer of exactly its size, under ASan+UBSan."""
    missing = build_tools_missing()
    if missing:
        pytest.skip(missing)
    done = make(tmp_path, "asan", FUZZ_ITERATIONS="100000")
    if done.returncode != 0 and "LeakSanitizer has encountered a fatal error" in done.stderr:
        # LSan cannot stop the world without ptrace (some containers); ASan itself still runs
        done = make(
            tmp_path, "asan", FUZZ_ITERATIONS="100000", ASAN_RUN_OPTIONS="detect_leaks=0:abort_on_error=1"
        )
    if done.returncode != 0 and "libasan" in done.stderr:
        pytest.skip("compiler has no AddressSanitizer runtime")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "spec_test fuzz: 100000 inputs" in done.stdout
    assert "0 disagreement(s)" in done.stdout
    assert "ERROR: AddressSanitizer" not in done.stderr


def test_parser_under_valgrind(build_dir: Path) -> None:
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind not installed")
    binary = str(build_dir / "spec_test")
    for args in (["unit"], ["fuzz", "3000", "7"]):
        done = subprocess.run(
            ["valgrind", "--error-exitcode=99", "--leak-check=full", "-q", binary, *args],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "Invalid read" not in done.stderr and "definitely lost" not in done.stderr


# --- the C parser agrees with tfslurm/jobspec.py --------------------------------------


def c_verdicts(build_dir: Path, specs: list[str], mode: str = "check") -> list[str]:
    """'OK' or 'ERR <reason>' from the C checker (``spec_test check`` for jobs specs,
    ``check-template`` for host templates) for each text."""
    data = b"".join(s.encode("utf-8", "surrogatepass") + b"\0" for s in specs)
    done = subprocess.run([str(build_dir / "spec_test"), mode], input=data, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode("ascii").splitlines()
    assert len(lines) == len(specs)
    return lines


def python_accepts(spec: str) -> bool:
    """Whether some step could run this spec: split_spec accepts it and parse_jobs accepts
    it for at least one task count (the C side cannot know the step's size)."""
    try:
        entries = split_spec(spec)
    except JobSpecError:
        return False
    fixed = sum(count or 0 for _, count in entries)
    for num_tasks in {max(fixed, 1), fixed + 1}:
        try:
            parse_jobs(spec, num_tasks)
            return True
        except JobSpecError:
            continue
    return False


NAMES = st.sampled_from(
    [
        "worker",
        "ps",
        "chief",
        "evaluator",
        "W2",
        "a_b",
        "x",
        "Worker",
        "wokrer",
        "workers",
        "PS",
        "p",
        "chef",
        "wrkr",
        "ps2x",
    ]
)
COUNTS = st.sampled_from(["*", "0", "1", "2", "3", "007", "123456789012345678", "1234567890123456789"])
BLANK = st.sampled_from(["", "", "", " ", "\t", "  "])
# Noise that may turn a good spec into a bad one: separators, signs, control and non-ASCII.
NOISE = st.sampled_from(
    [",", ":", "*", "-", "+", ";", "=", "", " ", "\n", "\r", "\x0b", "\x1c", "\x7f",
     "\u00e9", "\u00a0", "\u2003", "\U0001f600", "{", "1", "A"]
)  # fmt: skip


@st.composite
def specs(draw: st.DrawFn) -> str:
    entries = draw(st.lists(st.tuples(BLANK, NAMES, BLANK, BLANK, COUNTS, BLANK), min_size=1, max_size=5))
    text = ",".join(f"{a}{n}{b}:{c}{k}{d}" for a, n, b, c, k, d in entries)
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(NOISE) + text[at:]
    return text


ASCII_BLANKS = set(" \t")


def plain(spec: str) -> bool:
    """Printable ASCII plus space and tab: where the two parsers must agree exactly."""
    return all(c in ASCII_BLANKS or " " <= c <= "~" for c in spec)


@pytest.mark.parametrize(
    "spec",
    ["worker:4", "chief:1,ps:2,worker:*", " ps : 1 ,\tworker:* ", "worker:0,ps:*", "Ab_1:2",
     "worker", "worker:", "worker:-1", "worker:*,ps:*", "ps:1,ps:2", "chief:2", "worker:0",
     "", "   ", ",", "worker:1,", "wor ker:1", "worker:1:2", "x" * 5000 + ":1",
     "worker:1234567890123456789", "w" * 4094 + ":1", "w" * 4095 + ":1",
     "Worker:*", "wokrer:2", "ps:1,workers:*", "PS:1,worker:*", "chef:1,worker:*", "evaluatr:1,worker:*",
     "wrkr:2", "learner:1,actor:*"],
)  # fmt: skip
def test_c_and_python_agree_on_examples(build_dir: Path, spec: str) -> None:
    (verdict,) = c_verdicts(build_dir, [spec])
    assert (verdict == "OK") == python_accepts(spec), (spec[:80], verdict)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(specs(), min_size=1, max_size=25))
@example(batch=["worker:4\n", "\nworker:4", "worker:4\u00a0", "ps:1,\x1cworker:*"])
def test_c_parser_matches_python(build_dir: Path, batch: list[str]) -> None:
    """On printable ASCII the verdicts are equal; elsewhere C may only be stricter
    (it refuses every control character and non-ASCII byte, which Python's str.strip
    would silently drop around a name or count)."""
    for spec, verdict in zip(batch, c_verdicts(build_dir, batch), strict=True):
        ok_py = python_accepts(spec)
        if plain(spec):
            assert (verdict == "OK") == ok_py, (spec, verdict)
        else:
            assert verdict != "OK", (spec, "C accepted a control or non-ASCII character")
        if verdict != "OK":
            assert verdict.startswith("ERR ") and verdict[4:].isprintable()


# --- install / uninstall -------------------------------------------------------------


def test_install_and_uninstall_with_destdir(build_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    variables = {"DESTDIR": str(root), "PREFIX": "/opt/tfslurm", "SYSCONFDIR": "/etc/slurm"}
    done = make(build_dir, "install-conf", **variables)
    assert done.returncode == 0, done.stdout + done.stderr
    plugin = root / "opt/tfslurm/lib/slurm" / PLUGIN_NAME
    conf = root / "etc/slurm/plugstack.conf.d/tfslurm.conf"
    assert plugin.is_file() and os.access(plugin, os.X_OK)
    lines = [line for line in conf.read_text().splitlines() if line and not line.startswith("#")]
    # the example points at the installed path (not the DESTDIR staging path)
    assert lines == [
        "optional /opt/tfslurm/lib/slurm/spank_tfslurm.so default_spec=worker:* prolog=/etc/slurm/tfslurm-taskprolog"
    ]
    assert (root / "opt/tfslurm/share/tfslurm/tfslurm.conf").read_text() == conf.read_text()

    done = make(build_dir, "uninstall", **variables)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not plugin.exists() and not conf.exists()
    assert not (root / "opt/tfslurm/share/tfslurm").exists()


def test_libdir_override(build_dir: Path, tmp_path: Path) -> None:
    done = make(build_dir, "install", DESTDIR=str(tmp_path), LIBDIR="/usr/lib/x86_64-linux-gnu/slurm-wlm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "usr/lib/x86_64-linux-gnu/slurm-wlm" / PLUGIN_NAME).is_file()
    conf = (tmp_path / "usr/local/share/tfslurm/tfslurm.conf").read_text()
    assert "optional /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_tfslurm.so" in conf


# --- the plugin's host_template= check agrees with tfslurm/plan.py's -------------------


def c_template_verdicts(build_dir: Path, templates: list[str]) -> list[bool]:
    return [line == "OK" for line in c_verdicts(build_dir, templates, "check-template")]


def python_accepts_template(template: str) -> bool:
    try:
        plan_module._host_template(template, None)
    except PlanError:
        return False
    return True


TEMPLATE_CASES = [
    "{node}",
    "{node}-ib",
    "{node}.cluster.example.org",
    "ib-{node}",
    "node-ib",
    "{node}{node}",  # refused by both: a template names one node's address
    "{node}\r",  # control characters and NUL: refused by both
    "{node}\x01",
    "{node}\x7f",
    "{node}\t",
    "{node} x",
    "é{node}",
    "{node}:8888",
    "{node};x",
    "{node},x",
    "{node}/x",
    "{nodes}",
    "{node}}",
    "{{node}",
    "{host}",
    "",
    "{node}" + "x" * 249,  # 255 characters: the plugstack argument's longest (TFD_TEMPLATE_MAX)
]


def test_c_and_python_host_template_checks_agree_on_the_table(build_dir: Path) -> None:
    verdicts = c_template_verdicts(build_dir, TEMPLATE_CASES)
    expected = [python_accepts_template(t) for t in TEMPLATE_CASES]
    assert verdicts == expected, [
        t for t, c, p in zip(TEMPLATE_CASES, verdicts, expected, strict=True) if c != p
    ]
    assert expected[:4] == [True] * 4 and expected[4:-1] == [False] * (len(TEMPLATE_CASES) - 5)
    assert expected[-1]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.text(st.sampled_from("{node}-.ab:;,/ \t\r\x00\x7fé") | st.characters(), max_size=12),
        min_size=1,
        max_size=20,
    )
)
def test_c_and_python_host_template_checks_agree(build_dir: Path, templates: list[str]) -> None:
    templates = [t for t in templates if "\x00" not in t]  # C strings end at a NUL
    assert c_template_verdicts(build_dir, templates) == [python_accepts_template(t) for t in templates]


def test_constants_shared_by_c_and_python_are_equal() -> None:
    """The C side and the Python side of one contract each spell these; one test keeps them
    one definition (the spec limits of jobspec.py, the per-node output header of prolog.py)."""
    from tfslurm import jobspec, prolog

    spec_h = (PLUGIN_DIR / "src" / "spec.h").read_text()
    node_h = (PLUGIN_DIR / "src" / "node.h").read_text()
    assert f"#define TFD_SPEC_MAX {jobspec._MAX_SPEC_CHARS}\n" in spec_h
    assert f"#define TFD_COUNT_DIGITS {jobspec._MAX_COUNT_DIGITS}\n" in spec_h
    assert f'#define TFD_NODE_HEADER "{prolog.NODE_HEADER}"\n' in node_h
