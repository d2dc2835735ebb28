#!/usr/bin/env bash
# tests/matrix.sh: run the test suite on every supported Slurm, each a real throwaway cluster.
#
#   sudo tests/matrix.sh [bookworm|trixie|sid|all|others] [--build-only] [--serial] [-- PYTEST ARGS...]
#
#   bookworm  Debian 12, Slurm 22.05     trixie  Debian 13, Slurm 24.11
#   sid       Debian sid, Slurm 26.05    all     the three (default)
#   others    every version but the host's own Debian (CI runs the host's with plain pytest)
#
# For each Debian release it builds, once, a root with Debian's own Slurm packages
# (debootstrap, cached in $TFSLURM_MATRIX_CACHE, default /var/cache/tfslurm-matrix), copies
# this checkout into it (tracked and untracked files git does not ignore), and runs README's
# two set-up commands there: `./install.sh` (with --no-demo: tests/test_demo.py runs the demo
# there), then `.venv/bin/python -m pytest`, in a
# mount namespace whose root is the tree (pivot_root, so slurmd is the root's binary, not the
# host's). The venv inside the root is kept between runs. The versions run side by side
# (--serial: one after another); their clusters share the host's network namespace and one
# lock for picking ports and subnets. Prints one line per version: Slurm version,
# passed/failed/skipped, minutes. Exit status: 0 only if every version passed.
#
# Where a Python runtime cannot be installed in a root (PyTorch's CPU build is kept on this
# project's machines for Python 3.11 only; TensorFlow has no stable release for Python 3.14),
# its tests skip there with that reason and the summary line names it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CHECKOUT=$PWD
CACHE=${TFSLURM_MATRIX_CACHE:-/var/cache/tfslurm-matrix}
MIRROR=${TFSLURM_MATRIX_MIRROR:-http://deb.debian.org/debian}
ALL=(bookworm trixie sid)

usage() { sed -n '2,20p' "$0"; }
die() { echo "matrix.sh: $*" >&2; exit 2; }

which_set=all build_only=0 serial=0 pytest_args=()
while (($#)); do
    case $1 in
        bookworm | trixie | sid | all | others) which_set=$1 ;;
        --build-only) build_only=1 ;;
        --serial) serial=1 ;;
        -h | --help) usage; exit 0 ;;
        --) shift; pytest_args=("$@"); break ;;
        *) die "unknown argument '$1' (try --help)" ;;
    esac
    shift
done
[[ $EUID -eq 0 ]] || die "must run as root (it builds Debian roots and starts Slurm clusters)"
command -v debootstrap >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
        die "debootstrap is not installed and apt-get could not install it"
}

host_codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
case $which_set in
    all) suites=("${ALL[@]}") ;;
    others) suites=(); for s in "${ALL[@]}"; do [[ $s == "$host_codename" ]] || suites+=("$s"); done ;;
    *) suites=("$which_set") ;;
esac

# What install.sh apt-installs, plus what a minimal root lacks for it and for the clusters.
ROOT_PKGS=(ca-certificates python3 python3-venv python3-dev gcc make valgrind iproute2 util-linux procps psmisc kmod
    slurm-wlm slurm-client libslurm-dev rsync)
# sid's python3 is 3.14, for which TensorFlow has no stable release: its root also gets 3.13,
# and the suite runs there with PYTHON=python3.13, so the TF tests run on Slurm 26.05 too.
declare -A EXTRA_PKGS=([sid]="python3.13 python3.13-venv python3.13-dev")
declare -A SUITE_PYTHON=([sid]=python3.13)

build_root() {  # build_root SUITE ROOT: debootstrap once; a marker says it is complete
    local suite=$1 root=$2
    [[ -e $root/.tfslurm-root-ready ]] && return 0
    # a build killed half-way before this script built in a namespace of its own may have
    # left /proc mounted in the root: unmount it, and never delete across a mount
    for m in $(awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
    rm -rf --one-file-system "$root"
    mkdir -p "$root"
    echo "matrix.sh: building the $suite root in $root (once; several minutes)"
    debootstrap --variant=minbase "$suite" "$root" "$MIRROR" >"$root.build.log" 2>&1 || {
        tail -20 "$root.build.log" >&2
        die "debootstrap $suite failed (log: $root.build.log)"
    }
    # sid's Release file may be past its Valid-Until on a machine whose clock is ahead.
    echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99tfslurm-matrix"
    printf 'deb %s %s main\n' "$MIRROR" "$suite" >"$root/etc/apt/sources.list"
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"  # no daemons start in the root
    chmod +x "$root/usr/sbin/policy-rc.d"
    echo "127.0.0.1 localhost $(hostname)" >"$root/etc/hosts"
    local rc=0
    # /proc for apt-get, in a mount namespace of its own: killed half-way, it leaves no mount
    unshare --mount --propagation private --fork -- bash -c '
        mount -t proc proc "$1/proc" &&
            chroot "$1" apt-get update -qq &&
            chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${@:2}"
    ' build "$root" "${ROOT_PKGS[@]}" ${EXTRA_PKGS[$suite]:-} >>"$root.build.log" 2>&1 || rc=$?
    ((rc == 0)) || { tail -20 "$root.build.log" >&2; die "apt-get in the $suite root failed (log: $root.build.log)"; }
    chroot "$root" apt-get clean
    touch "$root/.tfslurm-root-ready"
}

copy_checkout() {  # the checkout's files (as CI's clone has them), keeping the root's .venv
    local dest=$1
    mkdir -p "$dest"
    (cd "$CHECKOUT" && git ls-files -z --cached --others --exclude-standard) |
        rsync -a --delete --from0 --files-from=- "$CHECKOUT/" "$dest/.incoming/"
    rsync -a --delete --exclude=/.venv --exclude=/.incoming "$dest/.incoming/" "$dest/"
    rm -rf "$dest/.incoming"
}

# Inside a new mount namespace: bind the root on itself, give it /proc /sys /dev /run and
# the host's pip wheel dirs, pivot into it, and run the two commands.
INNER='
set -e
root=$1; shift
mount --make-rprivate /
mount --rbind "$root" "$root"
for d in proc sys dev; do mkdir -p "$root/$d"; mount --rbind "/$d" "$root/$d"; done
mount -t tmpfs -o mode=755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
# one lock for every cluster on this machine, in any root: clusters pick ports and subnets
# of the one network namespace they share under it
lock=/tmp/tfslurm-localcluster.lock
touch "$lock" "$root$lock" && mount --bind "$lock" "$root$lock"
# pip inside uses the host'"'"'s pip settings: index mirrors, local wheels, CA certificates
for d in /opt/wheels /opt/pypi /opt/pypi-more /etc/xdg/pip /root/.config/pip; do
    [ -d "$d" ] && mkdir -p "$root$d" && mount --rbind -o ro "$d" "$root$d"
done
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
    [ -f "$f" ] && mkdir -p "$root${f%/*}" && touch "$root$f" && mount --bind -o ro "$f" "$root$f"
done
cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
cd /
umount -l /.oldroot
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
cd /work/tfslurm
export TFSLURM_MATRIX_ROOT=1  # install.sh: no container runtimes in a root
# the demo runs in the suite (tests/test_demo.py), on every version: once is enough
./install.sh --no-demo
exec .venv/bin/python -m pytest "$@"
'

run_suite() {  # run_suite SUITE ROOT LOG
    local suite=$1 root=$2 log=$3 lock rc=0
    # one run at a time in a root: a second would overwrite the checkout and venv under the first
    exec {lock}>"$root.lock"
    flock -n "$lock" || { echo "matrix.sh: $suite: another run holds $root.lock; waiting for it" >&2; flock "$lock"; }
    copy_checkout "$root/work/tfslurm"
    unshare --mount --propagation private --fork -- \
        env -i CI="${CI:-}" TERM=dumb LANG=C.UTF-8 PYTHON="${SUITE_PYTHON[$suite]:-python3}" \
        $(env | grep -E '^PIP_[A-Z_]+=' || true) \
        bash -c "$INNER" inner "$root" "${pytest_args[@]}" >"$log" 2>&1 || rc=$?
    exec {lock}>&-
    return $rc
}

mkdir -p "$CACHE"
command -v rsync >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rsync >/dev/null
status=0 summary=() pids=() started=()
for suite in "${suites[@]}"; do  # build every root first (network-bound, once)
    t0=$SECONDS
    build_root "$suite" "$CACHE/$suite"
    ((build_only)) && echo "matrix.sh: $suite root ready ($((SECONDS - t0)) s)"
done
((build_only)) && exit 0

finish() {  # finish SUITE RC T0: the summary line of one version
    local suite=$1 rc=$2 t0=$3 root=$CACHE/$1 log=$CACHE/$1.pytest.log
    local slurm result absent line end=$SECONDS
    [[ -s $CACHE/$1.end ]] && end=$(<"$CACHE/$1.end") && rm -f "$CACHE/$1.end"
    slurm=$(chroot "$root" dpkg-query -W -f='${Version}' slurm-wlm 2>/dev/null || echo '?')
    result=$({ grep -E '^=* ?[0-9]+ (passed|failed|error|skipped).* in [0-9.]+s' "$log" || true; } |
        tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
    absent=$(cut -d: -f1 "$root/work/tfslurm/.venv/tfslurm-absent-runtimes.txt" 2>/dev/null | paste -sd, || true)
    line="$suite (Slurm $slurm): ${result:-no pytest summary, rc=$rc} [$(((end - t0) / 60)) min $(((end - t0) % 60)) s]"
    [[ -n $absent ]] && line+=" runtimes absent: $absent"
    summary+=("$line")
    if ((rc != 0)); then
        status=1
        echo "matrix.sh: $suite failed (rc=$rc); the end of $log:" >&2
        tail -40 "$log" >&2
    fi
}

t_all=$SECONDS
for suite in "${suites[@]}"; do
    log=$CACHE/$suite.pytest.log
    echo "matrix.sh: $suite: install.sh + pytest (log: $log)"
    if ((serial)); then
        t0=$SECONDS rc=0
        run_suite "$suite" "$CACHE/$suite" "$log" || rc=$?
        finish "$suite" "$rc" "$t0"
    else
        { rc=0; run_suite "$suite" "$CACHE/$suite" "$log" || rc=$?; echo "$SECONDS" >"$CACHE/$suite.end"; exit $rc; } &
        pids+=($!) started+=("$SECONDS")
    fi
done
for i in "${!pids[@]}"; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    finish "${suites[$i]}" "$rc" "${started[$i]}"
done
printf '\nmatrix.sh summary (%d min %d s in all)\n' $(((SECONDS - t_all) / 60)) $(((SECONDS - t_all) % 60))
printf '  %s\n' "${summary[@]}"
exit $status
