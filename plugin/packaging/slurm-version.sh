#!/bin/sh
# The Slurm release whose headers the plugin is built with, from SLURM_VERSION_NUMBER in
# INCLUDE/slurm/slurm_version.h (a SPANK plugin loads only into that major.minor).
#
#   slurm-version.sh INCLUDE               22.05.8   (the exact release)
#   slurm-version.sh INCLUDE series        22.05     (the major.minor it loads into)
#   slurm-version.sh INCLUDE next          22.06     (the first major.minor it does not fit)
#   slurm-version.sh INCLUDE depends PKG   PKG (>= 22.05), PKG (<< 22.06)   (a deb Depends)
set -eu
header=$1/slurm/slurm_version.h
hex=$(sed -n 's/^#define[[:space:]]*SLURM_VERSION_NUMBER[[:space:]]*0x\([0-9a-fA-F]*\).*/\1/p' "$header" 2>/dev/null)
[ -n "$hex" ] || exit 1
n=$((0x$hex))
major=$((n >> 16 & 255))
minor=$((n >> 8 & 255))
micro=$((n & 255))
case ${2:-} in
'') printf '%d.%02d.%d\n' "$major" "$minor" "$micro" ;;
series) printf '%d.%02d\n' "$major" "$minor" ;;
next) printf '%d.%02d\n' "$major" "$((minor + 1))" ;;
depends) printf '%s (>= %d.%02d), %s (<< %d.%02d)\n' "$3" "$major" "$minor" "$3" "$major" "$((minor + 1))" ;;
*) echo "slurm-version.sh: unknown mode '$2' (none, series, next or depends PKG)" >&2; exit 2 ;;
esac
