#!/usr/bin/env bash
# tests/images.sh: the container image the container tests run (tests/test_containers_cluster.py).
#
#   sudo tests/images.sh [PYTHON]     prints the image's directory once it is ready
#
# Built once and cached in $TFSLURM_IMAGE_CACHE (default /var/cache/tfslurm-images), like the
# version-matrix roots of tests/matrix.sh: a Debian 12 root (debootstrap, minbase) with
# Debian's python3 and, in /opt/venv, the same TensorFlow, Keras, JAX and PyTorch releases as
# PYTHON's environment (default: this checkout's .venv/bin/python), from the pip settings and
# local wheel directories of this machine. No registry: Charliecloud runs the directory
# (ch-run DIR), podman runs it with --rootfs DIR:O (an overlay keeps the directory unchanged).
#
# tfslurm itself is not in the image: /opt/venv's site-packages holds a .pth naming the empty
# directory /opt/tfslurm, so the image has tfslurm only where the tests bind-mount the
# checkout under test there (the code under test, never a stale copy), and is the image
# "without tfslurm" otherwise. /usr/local/bin has python, python3 and tfslurm (a launcher
# that fails with "No module named 'tfslurm'" in the image without it).
set -euo pipefail
SELF=$(realpath "${BASH_SOURCE[0]}")
cd "$(dirname "$SELF")/.."
CACHE=${TFSLURM_IMAGE_CACHE:-/var/cache/tfslurm-images}
MIRROR=${TFSLURM_MATRIX_MIRROR:-http://deb.debian.org/debian}
PYTHON=${1:-.venv/bin/python}
ROOT=$CACHE/bookworm-py
VERSION="tfslurm test image 3"  # change it when this script changes the image: it is rebuilt
die() { echo "images.sh: $*" >&2; exit 2; }

ready() { [[ $(head -1 "$ROOT/.tfslurm-image-ready" 2>/dev/null) == "$VERSION" ]]; }
ready && { echo "$ROOT"; exit 0; }
[[ $EUID -eq 0 ]] || die "must run as root (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
[[ -x $PYTHON ]] || die "no Python at $PYTHON to take the runtime versions from"
# The build's mounts (/proc, this machine's pip settings bound into the image) live in a
# mount namespace of the build's own: a build killed half-way takes them with it, instead of
# leaving them on the half-built image, read-only, for the next run to trip over.
if [[ -z ${TFSLURM_IMAGES_PRIVATE:-} ]]; then
    TFSLURM_IMAGES_PRIVATE=1 exec unshare --mount --propagation private -- "$SELF" "$@"
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9  # one build at a time; a second caller waits and finds the image ready
ready && { echo "$ROOT"; exit 0; }
t0=$SECONDS
log=$ROOT.build.log
cleanup() {  # every mount under the image: this build's, or one a killed older build left
    for m in $(awk -v r="$ROOT/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
}
cleanup
rm -rf --one-file-system "$ROOT"
mkdir -p "$ROOT"
echo "images.sh: building $ROOT (once; several minutes; log $log)" >&2
# The runtimes' releases of the suite's environment, so the image trains like the host does.
pins=$("$PYTHON" -m pip freeze 2>/dev/null | grep -i -E '^(tensorflow(_|-)cpu|keras|jax|jaxlib|torch|numpy|ml.dtypes|h5py)==' || true)
[[ -n $pins ]] || die "$PYTHON has none of tensorflow-cpu, jax, torch installed"
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$log" 2>&1 || {
    tail -20 "$log" >&2
    die "debootstrap failed (log: $log)"
}
printf 'deb %s bookworm main\n' "$MIRROR" >"$ROOT/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod +x "$ROOT/usr/sbin/policy-rc.d"
trap cleanup EXIT
mount -t proc proc "$ROOT/proc"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
{
    chroot "$ROOT" apt-get update -qq &&
        chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            python3 python3-venv ca-certificates
} >>"$log" 2>&1 || { tail -20 "$log" >&2; die "apt-get in the image failed (log: $log)"; }
# pip inside uses this machine's pip settings: index mirrors, local wheels, CA certificates
for d in /opt/wheels /opt/pypi /opt/pypi-more /etc/xdg/pip /root/.config/pip; do
    [[ -d $d ]] && mkdir -p "$ROOT$d" && mount --rbind -o ro "$d" "$ROOT$d"
done
for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
    [[ -f $f ]] && mkdir -p "$ROOT${f%/*}" && touch "$ROOT$f" && mount --bind -o ro "$f" "$ROOT$f"
done
{
    chroot "$ROOT" python3 -m venv /opt/venv &&
        printf '%s\n' "$pins" >"$ROOT/tmp/pins.txt" &&
        chroot "$ROOT" env $(env | grep -E '^PIP_[A-Z_]+=' || true) \
            /opt/venv/bin/python -m pip install -q --no-cache-dir -r /tmp/pins.txt
} >>"$log" 2>&1 || { tail -20 "$log" >&2; die "pip install of the runtimes failed (log: $log)"; }
cleanup
trap - EXIT
chroot "$ROOT" apt-get clean
rm -rf "$ROOT/tmp/pins.txt" "$ROOT/var/lib/apt/lists"/*
mkdir -p "$ROOT/opt/tfslurm"
# ch-run binds the host's /etc/hosts and /etc/resolv.conf only over files the image has: the
# test cluster's node names are in the hosts file of each node's mount namespace
[[ -e $ROOT/etc/hosts ]] || echo "127.0.0.1 localhost" >"$ROOT/etc/hosts"
touch "$ROOT/etc/resolv.conf"
site=$(chroot "$ROOT" /opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo /opt/tfslurm >"$ROOT$site/tfslurm-checkout.pth"
# scripts, not symlinks: Python finds its venv (pyvenv.cfg) beside the path it was started as
for name in python python3; do
    printf '#!/bin/sh\nexec /opt/venv/bin/python "$@"\n' >"$ROOT/usr/local/bin/$name"
    chmod 755 "$ROOT/usr/local/bin/$name"
done
printf '#!/opt/venv/bin/python\nimport sys\nfrom tfslurm.cli import main\nsys.exit(main())\n' >"$ROOT/usr/local/bin/tfslurm"
chmod 755 "$ROOT/usr/local/bin/tfslurm"
printf '%s\n%s\n' "$VERSION" "$pins" >"$ROOT/.tfslurm-image-ready"
echo "images.sh: $ROOT ready in $((SECONDS - t0)) s ($(du -sh "$ROOT" | cut -f1))" >&2
echo "$ROOT"
