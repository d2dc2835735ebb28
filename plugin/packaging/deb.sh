#!/bin/sh
# Build the tfslurm-spank .deb from a staged root (make deb fills it with install-conf and
# install-hook): writes DEBIAN/{control,conffiles,postinst,prerm}, then runs dpkg-deb.
#
#   deb.sh ROOT OUTDIR VERSION ARCH SLURM_VERSION DEPENDS CONFFILE PYDIR MAINTAINER
set -eu
root=$1 out=$2 version=$3 arch=$4 slurm=$5 depends=$6 conffile=$7 pydir=$8 maintainer=$9
name=tfslurm-spank
mkdir -p "$root/DEBIAN"
size=$(du -sk "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: $name
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends
Section: admin
Priority: optional
X-Slurm-Built-Against: $slurm
Description: tfslurm SPANK plugin: srun/sbatch/salloc --tf-dist
 The --tf-dist option gives every task of a step its TensorFlow TF_CONFIG and GPUs.
 Ships the plugin, its plugstack.conf.d line (enabled: Slurm reads it through the
 include line of Debian's plugstack.conf) and the hook it runs, with its own copy of
 the tfslurm Python package (standard library only).
 .
 Built against Slurm $slurm: a SPANK plugin loads only into the Slurm major.minor
 whose headers it was built with; rebuild this package with each Slurm upgrade.
CONTROL
printf '%s\n' "$conffile" > "$root/DEBIAN/conffiles"
# Byte-compile the hook's modules for the Python installed here (each task's hook run then
# reads them instead of compiling), and remove those files again before the package goes.
cat > "$root/DEBIAN/postinst" <<POSTINST
#!/bin/sh
set -e
if [ "\$1" = configure ] && command -v python3 >/dev/null; then
    python3 -m compileall -q $pydir/tfslurm >/dev/null || true
fi
POSTINST
cat > "$root/DEBIAN/prerm" <<PRERM
#!/bin/sh
set -e
find $pydir/tfslurm -depth -name __pycache__ -type d -exec rm -rf {} + 2>/dev/null || true
PRERM
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm"
deb=$out/${name}_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "built $deb (Slurm $slurm; Depends: $depends)"
