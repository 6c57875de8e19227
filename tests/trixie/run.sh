#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# tests/trixie/run.sh: the Debian 13 leg of tests/run.sh (GStreamer 1.26,
# gcc 14).  Runs, as root on the host, the project's own tests/run.sh inside
# a Debian 13 (trixie) minbase root: the unit and gst-check suites, the
# gst-check suite under valgrind and the real-kernel suite (the guest's
# userspace is then the trixie root).  Ends with one line "N passed, N failed".
#
# The root is made once with debootstrap and kept between runs under
# GST_NPU_TRIXIE_DIR (default /var/tmp/gst-npu-trixie); a marker written last
# says it is complete, and a root without it is made again (never while
# anything is mounted under it).  Packages tests/setup.sh installs stay in
# the root.  The source tree is bind-mounted at /src; its build directory
# inside is a separate one, kept beside the root (one per source tree), and
# bind-mounted over /src/build; it is built with -Dwerror=true, so that a
# warning of gcc 14 fails the leg.  All mounts are made in a private mount
# namespace and undone in a trap.
#
# `tests/trixie/run.sh -- CMD [ARGS..]` runs CMD in /src inside the root
# instead (e.g. `-- meson test -C build npuvisiontok`), for a developer.
#
# Exit status: 0 when everything passed; 1 on failures; 77 when the leg
# cannot run here (not root, no debootstrap and no apt to install it).
# Environment: GST_NPU_TRIXIE_DIR, DEBIAN_MIRROR (default: the first mirror in
# this machine's apt sources), GST_NPU_TRIXIE_TIMEOUT (seconds, default 2400).
set -uo pipefail
ME=tests/trixie/run.sh
SRC=$(cd "$(dirname "$0")/../.." && pwd -P)
DIR=${GST_NPU_TRIXIE_DIR:-/var/tmp/gst-npu-trixie}
ROOT=$DIR/root
MARK=$ROOT/.gst-npu-root-complete
tally() { echo "$1 passed, $2 failed"; }
skip() { echo "$ME: cannot run here: $*"; exit 77; }
die() { echo "$ME: $*"; tally 0 1; exit 1; }

# Re-run in a private mount namespace, so that no mount can outlive us even
# if the trap never runs.
if [ -z "${GST_NPU_TRIXIE_NS:-}" ]; then
  [ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, mounts)"
  command -v unshare >/dev/null || skip "unshare not found (util-linux)"
  GST_NPU_TRIXIE_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi

mkdir -p "$DIR" || die "cannot create $DIR"
# One leg at a time per root: the root and its apt state are shared.
exec 9>"$DIR/.lock"
flock -w 3600 9 || die "cannot lock $DIR/.lock"

mounted_under() { awk -v d="$1/" 'index($2 "/", d) == 1 { n++ } END { exit !n }' /proc/self/mounts; }

if [ ! -f "$MARK" ]; then
  mounted_under "$ROOT" && die "something is mounted under $ROOT; not rebuilding it"
  if ! command -v debootstrap >/dev/null; then
    command -v apt-get >/dev/null || skip "debootstrap not found"
    echo "$ME: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null 2>&1; } ||
      skip "cannot install debootstrap"
  fi
  MIRROR=${DEBIAN_MIRROR:-$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }
         /^deb / && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }')}
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
  echo "$ME: making the Debian 13 root in $ROOT (once; from $MIRROR)"
  rm -rf "$ROOT"
  debootstrap --variant=minbase trixie "$ROOT" "$MIRROR" > "$DIR/debootstrap.log" 2>&1 ||
    { tail -n 5 "$DIR/debootstrap.log"; rm -rf "$ROOT"; die "debootstrap failed (log: $DIR/debootstrap.log)"; }
  # Security updates, as a real Debian 13 machine has them.
  echo "deb ${MIRROR%/debian}/debian-security trixie-security main" > "$ROOT/etc/apt/sources.list.d/security.list"
  # No daemon starts inside the root when a package is installed.
  printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"
  chmod +x "$ROOT/usr/sbin/policy-rc.d"
  touch "$MARK"
fi

# The build directory of this source tree inside the root.
BUILD=$DIR/build-$(printf '%s' "$SRC" | md5sum | cut -c1-8)
mkdir -p "$BUILD" "$ROOT/src"

MNTS=()
mnt() { mount "$@" && MNTS+=("${*: -1}"); }
cleanup() {
  local i
  for ((i = ${#MNTS[@]} - 1; i >= 0; i--)); do
    umount -R "${MNTS[i]}" 2>/dev/null || umount -R -l "${MNTS[i]}"
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mnt -t proc proc "$ROOT/proc" || die "mount proc"
mnt -t sysfs sysfs "$ROOT/sys" || die "mount sysfs"
mnt --rbind /dev "$ROOT/dev" || die "bind /dev"
mount --make-rslave "$ROOT/dev"
mnt -t tmpfs tmpfs "$ROOT/tmp" || die "mount /tmp"
mnt --bind "$SRC" "$ROOT/src" || die "bind the source"
mkdir -p "$ROOT/src/build" 2>/dev/null
mnt --bind "$BUILD" "$ROOT/src/build" || die "bind the build dir"
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null

ENV=(/usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  HOME=/root LANG=C.UTF-8 TERM=dumb GST_NPU_TRIXIE_LEG=1
  # the real-kernel guest boots Debian 13's own 6.12 kernel (Debian 12
  # takes it from bookworm-security as linux-image-6.12-amd64)
  GST_NPU_RK_KERNEL=linux-image-amd64)
if [ "${1:-}" = -- ]; then
  shift
  chroot "$ROOT" "${ENV[@]}" /bin/sh -c 'cd /src && exec "$@"' sh "$@"
  exit
fi

LOG=$BUILD/trixie.log
echo "$ME: running tests/run.sh in Debian $(cat "$ROOT/etc/debian_version") (log: $LOG)"
timeout -k 10 "${GST_NPU_TRIXIE_TIMEOUT:-2400}" \
  chroot "$ROOT" "${ENV[@]}" /bin/sh -c 'cd /src && ./tests/setup.sh >/dev/null 2>&1;
    meson configure build -Dwerror=true >/dev/null 2>&1; ./tests/run.sh' 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$LOG" | tail -n 1)
[ -n "$line" ] || die "tests/run.sh in the root gave no tally (exit $rc)"
p=${line%% passed*}
f=$(echo "$line" | sed 's/.*, \([0-9]*\) failed/\1/')
[ "$rc" = 0 ] || [ "$f" != 0 ] || f=$((f + 1))
tally "$p" "$f"
[ "$f" = 0 ]
