"""The SPANK plugin's build against the installed Slurm: warnings, exported symbols,
hardening, its identity, install and uninstall, the packages, and the constants C and
Python share. Its parsers, which need no Slurm, are in ``test_plugin_parsers.py``; loading
the plugin into a real Slurm is in ``test_site_cluster.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_build import PLUGIN_DIR, PLUGIN_NAME, build_plugin, build_tools_missing, make
from tfslurm import __version__, prolog

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


# --- install / uninstall -------------------------------------------------------------


def test_install_and_uninstall_with_destdir(build_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    variables = {"DESTDIR": str(root), "PREFIX": "/opt/tfslurm", "SYSCONFDIR": "/etc/slurm"}
    done = make(build_dir, "install-conf", "install-hook", **variables)
    assert done.returncode == 0, done.stdout + done.stderr
    plugin = root / "opt/tfslurm/lib/slurm" / PLUGIN_NAME
    hook, copy = root / "etc/slurm/tfslurm-taskprolog", root / "opt/tfslurm/lib/tfslurm/python/tfslurm"
    assert hook.read_text() == prolog.wrapper_script("/usr/bin/python3", "/opt/tfslurm/lib/tfslurm/python")
    assert (copy / "prolog.py").read_bytes() == Path(prolog.__file__).read_bytes()
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
    assert not hook.exists() and not (root / "opt/tfslurm/lib/tfslurm").exists()


def test_libdir_override(build_dir: Path, tmp_path: Path) -> None:
    done = make(build_dir, "install", DESTDIR=str(tmp_path), LIBDIR="/usr/lib/x86_64-linux-gnu/slurm-wlm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "usr/lib/x86_64-linux-gnu/slurm-wlm" / PLUGIN_NAME).is_file()
    conf = (tmp_path / "usr/local/share/tfslurm/tfslurm.conf").read_text()
    assert "optional /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_tfslurm.so" in conf


def test_constants_shared_by_c_and_python_are_equal() -> None:
    """The C side and the Python side of one contract each spell these; one test keeps them
    one definition (the spec limits of jobspec.py, the per-node output header of prolog.py)."""
    from tfslurm import jobspec

    spec_h = (PLUGIN_DIR / "src" / "spec.h").read_text()
    node_h = (PLUGIN_DIR / "src" / "node.h").read_text()
    assert f"#define TFD_SPEC_MAX {jobspec._MAX_SPEC_CHARS}\n" in spec_h
    assert f"#define TFD_COUNT_DIGITS {jobspec._MAX_COUNT_DIGITS}\n" in spec_h
    assert f'#define TFD_NODE_HEADER "{prolog.NODE_HEADER}"\n' in node_h


# --- packages: make deb, make spec, make rpm ------------------------------------------


def header_slurm_version() -> tuple[int, int, int]:
    """(major, minor, micro) of the Slurm whose headers the plugin is built with."""
    header = Path("/usr/include/slurm/slurm_version.h").read_text()
    (number,) = re.findall(r"^#define SLURM_VERSION_NUMBER (0x[0-9a-fA-F]+)$", header, re.MULTILINE)
    value = int(number, 16)
    return value >> 16 & 255, value >> 8 & 255, value & 255


def files_under(top: Path) -> list[str]:
    """Every file below ``top``, links to directories followed, bytecode left out."""
    return sorted(
        os.path.relpath(os.path.join(d, f), top)
        for d, dirs, files in os.walk(top, followlinks=True)
        if "__pycache__" not in Path(d).parts
        for f in files
    )


def plugstack_lines(conf: Path) -> list[str]:
    return [line for line in conf.read_text().splitlines() if line and not line.startswith("#")]


def test_deb_ships_the_plugin_its_line_and_the_hook(build_dir: Path, tmp_path: Path) -> None:
    """Built against this Slurm, depending on its major.minor, every file root's, the
    plugstack line a configuration file naming the packaged plugin and hook."""
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb not found (not a Debian-like system)")
    done = make(build_dir, "deb")
    assert done.returncode == 0, done.stdout + done.stderr
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout
    (deb,) = build_dir.glob("*.deb")
    assert deb.name == f"tfslurm-spank_{__version__}_{arch.strip()}.deb"
    info = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(": ", 1) for line in info.splitlines() if not line.startswith(" "))
    major, minor, micro = header_slurm_version()
    assert (fields["Package"], fields["Version"], fields["Architecture"]) == (
        "tfslurm-spank",
        __version__,
        arch.strip(),
    )
    assert fields["X-Slurm-Built-Against"] == f"{major}.{minor:02d}.{micro}"
    assert fields["Depends"] == (
        f"slurm-wlm-basic-plugins (>= {major}.{minor:02d}), "
        f"slurm-wlm-basic-plugins (<< {major}.{minor + 1:02d}), python3 (>= 3.11)"
    )
    installed = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", "slurm-wlm-basic-plugins"], capture_output=True, text=True
    )  # fmt: skip
    if installed.returncode == 0 and installed.stdout:  # Debian's Slurm here: the package fits it
        for op, bound in (("ge", f"{major}.{minor:02d}"), ("lt", f"{major}.{minor + 1:02d}")):
            assert subprocess.run(["dpkg", "--compare-versions", installed.stdout, op, bound]).returncode == 0

    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert {line.split()[1] for line in listing.splitlines()} == {"root/root"}
    root, control = tmp_path / "root", tmp_path / "control"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    subprocess.run(["dpkg-deb", "-e", str(deb), str(control)], check=True)
    conffile = "/etc/slurm/plugstack.conf.d/tfslurm.conf"
    assert (control / "conffiles").read_text() == conffile + "\n"
    (plugin,) = root.glob(f"usr/lib/*/slurm-wlm/{PLUGIN_NAME}")
    assert plugin.read_bytes() == (build_dir / PLUGIN_NAME).read_bytes()
    hook = root / "usr/lib/tfslurm/tfslurm-taskprolog"
    assert plugstack_lines(root / conffile.lstrip("/")) == [
        f"optional /{plugin.relative_to(root)} default_spec=worker:* prolog=/usr/lib/tfslurm/tfslurm-taskprolog"
    ]
    assert hook.stat().st_mode & 0o777 == 0o755
    assert hook.read_text() == prolog.wrapper_script("/usr/bin/python3", "/usr/lib/tfslurm/python")
    copy = root / "usr/lib/tfslurm/python/tfslurm"
    source = Path(prolog.__file__).parent
    shipped = files_under(copy)
    assert shipped == files_under(source)  # data/sbatch_templates, a link in the tree, as files
    example = "usr/share/tfslurm/tfslurm.conf"
    assert (root / example).read_text() == (root / conffile.lstrip("/")).read_text()
    assert files_under(root) == sorted(
        [conffile.lstrip("/"), str(plugin.relative_to(root)), str(hook.relative_to(root)), example]
        + [str((copy / name).relative_to(root)) for name in shipped]
    )
    assert all((copy / name).read_bytes() == (source / name).read_bytes() for name in shipped)


SPEC_MACROS = {  # rpm's values on x86_64 (rpm --eval), for the checks that need no rpmbuild
    "_prefix": "/usr", "_libdir": "/usr/lib64", "_sysconfdir": "/etc", "_datadir": "/usr/share",
    "_includedir": "/usr/include", "optflags": "-O2 -g", "nil": "",
}  # fmt: skip


def expand_macros(text: str, macros: dict[str, str]) -> str:
    """``%{name}`` replaced until none is left (an undefined one raises KeyError), ``%%`` -> ``%``."""
    pattern = re.compile(r"%\{(\w+)\}")
    while pattern.search(text):
        text = pattern.sub(lambda m: macros[m.group(1)], text)
    return text.replace("%%", "%")


def spec_sections(spec: str) -> dict[str, str]:
    parts = re.split(
        r"^(%(?:description|prep|build|install|post|preun|files|changelog))\b.*$", spec, flags=re.M
    )
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_rpm_spec_is_complete_and_lists_what_its_install_puts_in_place(
    build_dir: Path, tmp_path: Path
) -> None:
    """What can be checked without rpmbuild: tags, versions, sections; then %build and
    %install run as rpmbuild would (in an unpacked copy of the sources, macros expanded),
    and %files must name exactly what they put into the build root."""
    done = make(build_dir, "spec")
    assert done.returncode == 0, done.stdout + done.stderr
    spec = (build_dir / "rpm/SPECS/tfslurm-spank.spec").read_text()
    assert re.findall(r"@\w+@", spec) == []
    tags = re.findall(r"^(\w+):\s*(.*\S)\s*$", spec, re.M)
    single = dict(tags)
    for tag in ("Name", "Version", "Release", "Summary", "License", "Source0"):
        assert single.get(tag), tag
    major, minor, micro = header_slurm_version()
    assert (single["Name"], single["Version"], single["License"]) == (
        "tfslurm-spank",
        __version__,
        "Apache-2.0",
    )
    assert [v for t, v in tags if t == "Requires"] == [
        f"slurm >= {major}.{minor:02d}", f"slurm < {major}.{minor + 1:02d}", "python3 >= 3.11"
    ]  # fmt: skip
    globals_ = dict(re.findall(r"^%global (\w+) (.*)$", spec, re.M))
    assert globals_["slurm_built_against"] == f"{major}.{minor:02d}.{micro}"
    sections = spec_sections(spec)
    assert list(sections) == [
        "%description",
        "%prep",
        "%build",
        "%install",
        "%post",
        "%preun",
        "%files",
        "%changelog",
    ]
    assert re.match(
        rf"\n\* \w{{3}} \w{{3}} \d\d \d{{4}} .+ - {re.escape(__version__)}-1\n", sections["%changelog"]
    )

    # rpmbuild's %setup: the source archive of `make rpm` (plugin/, tfslurm/ links followed, LICENSE)
    src, buildroot = tmp_path / "src", tmp_path / "buildroot"
    shutil.copytree(PLUGIN_DIR, src / "plugin", ignore=shutil.ignore_patterns("build"))
    shutil.copytree(
        PLUGIN_DIR.parent / "tfslurm", src / "tfslurm", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy2(PLUGIN_DIR.parent / "LICENSE", src / "LICENSE")
    macros = SPEC_MACROS | {"name": single["Name"], "version": __version__, "buildroot": str(buildroot)}
    macros |= {k: expand_macros(v, macros) for k, v in globals_.items() if k != "__brp_python_bytecompile"}
    # %{!?NAME: %global NAME VALUE}: defaults for what rpmbuild may not define
    for name, value in re.findall(r"^%\{!\?(\w+):\s*%global \1 (.*)\}$", spec, re.M):
        macros.setdefault(name, expand_macros(value, macros))
    for section in ("%build", "%install"):
        script = expand_macros(sections[section], macros)
        done = subprocess.run(["sh", "-ec", script], cwd=src, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, section + done.stdout[-2000:] + done.stderr[-2000:]
    listed = []
    for line in expand_macros(sections["%files"], macros).splitlines():
        words = line.split()
        if not words or words[0] == "%license":
            assert not words or (src / words[1]).is_file()
            continue
        listed.append(buildroot / words[-1].lstrip("/"))
    assert all(path.exists() for path in listed), [str(p) for p in listed if not p.exists()]
    put = [p for p in buildroot.rglob("*") if p.is_file()]
    assert put and all(any(p == f or f in p.parents for f in listed) for p in put)
    assert (buildroot / "usr/lib64/slurm" / PLUGIN_NAME).is_file()
    assert plugstack_lines(buildroot / "etc/slurm/plugstack.conf.d/tfslurm.conf") == [
        f"optional /usr/lib64/slurm/{PLUGIN_NAME} default_spec=worker:* prolog=/usr/lib/tfslurm/tfslurm-taskprolog"
    ]


def test_make_rpm_builds_the_package_or_says_in_one_line_it_needs_rpmbuild(build_dir: Path) -> None:
    done = make(build_dir, "rpm")
    if shutil.which("rpmbuild") is None:
        assert done.returncode != 0
        ours = [line for line in done.stderr.splitlines() if not line.startswith(("make: ", "make["))]
        assert ours == ["make rpm: rpmbuild is needed (dnf install rpm-build; Debian: apt-get install rpm)"]
        return
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (package,) = (build_dir / "rpm/RPMS").glob(f"*/tfslurm-spank-{__version__}-1.*.rpm")
    major, minor, _ = header_slurm_version()
    requires = subprocess.run(
        ["rpm", "-qp", "--requires", str(package)], capture_output=True, text=True
    ).stdout
    assert {f"slurm >= {major}.{minor:02d}", f"slurm < {major}.{minor + 1:02d}", "python3 >= 3.11"} <= set(
        requires.splitlines()
    )
    files = subprocess.run(["rpm", "-qpl", str(package)], capture_output=True, text=True).stdout.splitlines()
    assert {f"/usr/lib64/slurm/{PLUGIN_NAME}", "/usr/lib/tfslurm/tfslurm-taskprolog",
            "/usr/lib/tfslurm/python/tfslurm/prolog.py"} <= set(files)  # fmt: skip
    configs = subprocess.run(["rpm", "-qpc", str(package)], capture_output=True, text=True).stdout
    assert configs.splitlines() == ["/etc/slurm/plugstack.conf.d/tfslurm.conf"]
