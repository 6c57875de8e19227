#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# qemu-run.sh: run a command as root inside a real Linux kernel under QEMU.
#
# usage: qemu-run.sh [-t SECS] [-m MOD[,MOD..]] [-s SRCDIR] [-b BUILDDIR]
#                    [-r RESULTSDIR] [-C DIR] [-e VAR].. [--] CMD [ARGS..]
#
# Boots Debian's linux-image-6.12-amd64 kernel (bookworm-security; fetched with
# `apt-get download` and unpacked with `dpkg -x`, never installed) under
# qemu-system-x86_64 with TCG.  The guest's root is a tmpfs; it sees, over 9p
# and read-only: the host's /usr (with a tmpfs overlay, so the kernel's modules
# can appear under /usr/lib/modules) and /etc, SRCDIR and BUILDDIR at their
# host paths.  /bin, /sbin, /lib, /lib64 are symlinks into usr (merged /usr).
# RESULTSDIR (default: a temporary directory, removed afterwards) is shared
# writable at /run/rk/results; the guest command finds it in $RK_RESULTS.
# MODs are modprobe'd before CMD runs; CMD runs in DIR (default SRCDIR, or /).
# -e VAR forwards the host's environment variable VAR into the guest.
#
# Exit status: CMD's status; 124 timeout (default 600 s); 125 setup failure;
# 77 cannot run here (no qemu, no kernel package), with the reason on stderr.
#
# Environment:
#   GST_NPU_RK_CACHE   cache for the unpacked kernel and the initramfs
#                      (default ${XDG_CACHE_HOME:-$HOME/.cache}/gst-npu-realkernel)
#   GST_NPU_RK_KERNEL  kernel meta-package (default linux-image-6.12-amd64)
#   GST_NPU_RK_SMP     guest CPUs (default 2)
#   GST_NPU_RK_MEM     guest memory in MiB (default 1024)
#   GST_NPU_RK_KVM=1   use KVM instead of TCG (stock kernels may not boot on
#                      every KVM host; TCG always works)
set -uo pipefail

ME=qemu-run.sh
TMO=600; MODS=""; SRC=""; BLD=""; RES=""; WD=""; FWD=()
while [ $# -gt 0 ]; do
  case "$1" in
    -t) TMO=$2; shift 2;;
    -m) MODS=$2; shift 2;;
    -s) SRC=$2; shift 2;;
    -b) BLD=$2; shift 2;;
    -r) RES=$2; shift 2;;
    -C) WD=$2; shift 2;;
    -e) FWD+=("$2"); shift 2;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    --) shift; break;;
    -*) echo "$ME: unknown option $1" >&2; exit 125;;
    *) break;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $ME [-t secs] [-m mods] [-s src] [-b build] [-r results] [-C dir] [-e VAR].. -- cmd [args..]" >&2; exit 125; }

skip() { echo "$ME: cannot run here: $*" >&2; exit 77; }
fail() { echo "$ME: setup failure: $*" >&2; exit 125; }

# --- host tools -------------------------------------------------------------
QEMU=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 not found (package qemu-system-x86)"
BUSYBOX=""
for b in /usr/bin/busybox /bin/busybox; do
  [ -x "$b" ] && ! LC_ALL=C ldd "$b" >/dev/null 2>&1 && { BUSYBOX=$b; break; }
done
[ -n "$BUSYBOX" ] || skip "no statically linked busybox (package busybox-static)"
for t in cpio gzip xz depmod dpkg apt-get apt-cache timeout flock; do
  command -v $t >/dev/null || skip "$t not found"
done
[ "$(uname -m)" = x86_64 ] || skip "host is $(uname -m), the harness boots an amd64 kernel"

abspath() { (cd "$1" 2>/dev/null && pwd -P); }
if [ -n "$SRC" ]; then SRC=$(abspath "$SRC") || fail "no such directory: source dir"; fi
if [ -n "$BLD" ]; then BLD=$(abspath "$BLD") || fail "no such directory: build dir"; fi
[ -n "$WD" ] || WD=${SRC:-/}

CACHE=${GST_NPU_RK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gst-npu-realkernel}
case "$CACHE" in /run/*|/dev/*|/proc/*|/sys/*) fail "cache dir $CACHE must not be under /run, /dev, /proc or /sys";; esac
mkdir -p "$CACHE" || fail "cannot create cache dir $CACHE"
CACHE=$(abspath "$CACHE")
KPKG=${GST_NPU_RK_KERNEL:-linux-image-6.12-amd64}

# --- kernel: apt-get download + dpkg -x + depmod, once ----------------------
prepare_kernel() {
  local real deb
  real=$(apt-cache depends "$KPKG" 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
  if [ -z "$real" ]; then
    # offline, or no apt lists: use what the cache already holds
    real=$(ls -d "$CACHE"/linux-image-*/.ok 2>/dev/null | sort -V | tail -n1 | xargs -r dirname | xargs -r basename)
    [ -n "$real" ] || skip "cannot resolve $KPKG (run apt-get update; needs bookworm-security in sources)"
  fi
  KROOT=$CACHE/$real
  [ -f "$KROOT/.ok" ] && return 0
  echo "$ME: fetching $real (once, into $CACHE)" >&2
  rm -rf "$KROOT" "$CACHE/dl"; mkdir -p "$CACHE/dl"
  (cd "$CACHE/dl" && apt-get download -q "$real") >"$CACHE/dl/log" 2>&1 ||
    { sed 's/^/  /' "$CACHE/dl/log" | tail -n3 >&2; rm -rf "$CACHE/dl"; skip "apt-get download $real failed"; }
  deb=$(ls "$CACHE/dl/"*.deb 2>/dev/null | head -n1)
  [ -n "$deb" ] || skip "apt-get download $real gave no .deb"
  mkdir -p "$KROOT.tmp" && dpkg -x "$deb" "$KROOT.tmp" || fail "dpkg -x $deb"
  rm -rf "$CACHE/dl"
  # Debian 13's kernel packages put the modules under usr/lib (merged /usr)
  if [ ! -d "$KROOT.tmp/lib/modules" ] && [ -d "$KROOT.tmp/usr/lib/modules" ]; then
    mkdir -p "$KROOT.tmp/lib" && mv "$KROOT.tmp/usr/lib/modules" "$KROOT.tmp/lib/modules" ||
      fail "move usr/lib/modules"
  fi
  local k; k=$(ls "$KROOT.tmp/lib/modules" | head -n1)
  [ -n "$k" ] && ls "$KROOT.tmp/boot/vmlinuz-$k" >/dev/null || fail "$real has no kernel image"
  depmod -b "$KROOT.tmp" "$k" || fail "depmod -b"
  mv "$KROOT.tmp" "$KROOT" && touch "$KROOT/.ok"
}

# --- initramfs: static busybox, the 9p/overlay modules, /init ---------------
INIT_MODS="fs/netfs/netfs net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p fs/overlayfs/overlay"
write_init() { cat <<'INIT'
#!/bin/busybox sh
# gst-npu real-kernel guest init
B=/bin/busybox; R=/newroot
die() { echo "qemu-run guest: $*" >/dev/console; echo 125 > $R/run/rk/rc 2>/dev/null; $B sync; $B poweroff -f; }
$B mount -t proc proc /proc; $B mount -t sysfs sys /sys; $B mount -t devtmpfs dev /dev
for m in $($B cat /mods/order); do $B insmod /mods/$m.ko || die "insmod $m"; done
P9="trans=virtio,version=9p2000.L,msize=512000"
$B mkdir -p $R; $B mount -t tmpfs -o mode=755 root $R
cd $R && $B mkdir -p usr etc proc sys dev run tmp var/tmp root home mnt .ovl/lower .ovl/rw
$B chmod 1777 tmp var/tmp
for d in bin sbin lib lib64; do $B ln -s usr/$d $d; done
$B mount -t tmpfs -o mode=755 run $R/run && $B mkdir -p $R/run/rk
$B mount -t 9p -o $P9,rw,cache=none rk $R/run/rk || die "9p rk"
[ -f $R/run/rk/config ] || die "no config"
. $R/run/rk/config
$B mount -t tmpfs -o mode=755 ovl $R/.ovl/rw && $B mkdir -p $R/.ovl/rw/up $R/.ovl/rw/wk
$B mount -t 9p -o $P9,ro,cache=loose usr $R/.ovl/lower || die "9p usr"
$B mount -t overlay -o lowerdir=$R/.ovl/lower,upperdir=$R/.ovl/rw/up,workdir=$R/.ovl/rw/wk ovl $R/usr || die "overlay usr"
$B mount -t 9p -o $P9,ro,cache=loose etc $R/etc || die "9p etc"
K=$($B uname -r); $B mkdir -p $R/usr/lib/modules/$K
$B mount -t 9p -o $P9,ro,cache=loose kmods $R/usr/lib/modules/$K || die "9p kmods"
i=0; for p in $RK_SHARES; do
  $B mkdir -p $R$p 2>/dev/null; $B mount -t 9p -o $P9,ro,cache=loose share$i $R$p || die "9p share$i ($p)"; i=$((i+1))
done
$B mount -t proc proc $R/proc; $B mount -t sysfs sys $R/sys; $B mount -t devtmpfs dev $R/dev
$B mkdir -p $R/dev/pts $R/dev/shm; $B mount -t devpts devpts $R/dev/pts; $B mount -t tmpfs shm $R/dev/shm
$B mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
$B mount -t tracefs tracefs $R/sys/kernel/tracing 2>/dev/null
$B hostname rk-guest
$B ln -sf /proc/self/fd $R/dev/fd 2>/dev/null
for m in $(echo "$RK_MODS" | $B tr , ' '); do $B chroot $R /sbin/modprobe $m || die "modprobe $m"; done
echo "qemu-run guest: up in $($B cut -d' ' -f1 /proc/uptime)s (kernel $K)" >/dev/console
$B chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root TERM=dumb LANG=C.UTF-8 RK_GUEST=1 RK_RESULTS=/run/rk/results \
  /bin/bash /run/rk/cmd.sh </dev/null >/dev/console 2>&1
echo $? > $R/run/rk/rc
$B sync; $B umount $R/run/rk; $B poweroff -f
INIT
}

prepare_initramfs() {
  local sum k t m f base
  sum=$( { write_init; echo "$INIT_MODS"; } | md5sum | cut -c1-10)
  INITRD=$CACHE/initramfs-$(basename "$KROOT")-$sum.cpio.gz
  [ -f "$INITRD" ] && return 0
  k=$(ls "$KROOT/lib/modules" | head -n1)
  t=$(mktemp -d "$CACHE/initramfs.XXXXXX") || fail "mktemp"
  mkdir -p "$t/bin" "$t/mods" "$t/proc" "$t/sys" "$t/dev" "$t/newroot"
  cp "$BUSYBOX" "$t/bin/busybox" || fail "copy busybox"
  write_init > "$t/init"; chmod +x "$t/init"
  : > "$t/mods/order"
  for m in $INIT_MODS; do
    base=${m##*/}; f=$KROOT/lib/modules/$k/kernel/$m.ko
    if [ -f "$f.xz" ]; then xz -dc "$f.xz" > "$t/mods/$base.ko" || fail "xz -d $f.xz"   # busybox insmod cannot read .ko.xz
    elif [ -f "$f.zst" ] && command -v zstd >/dev/null; then zstd -qdc "$f.zst" > "$t/mods/$base.ko"
    elif [ -f "$f" ]; then cp "$f" "$t/mods/"
    elif grep -q "kernel/$m.ko" "$KROOT/lib/modules/$k/modules.builtin" 2>/dev/null; then continue
    else fail "module $m not in $(basename "$KROOT")"; fi
    echo "$base" >> "$t/mods/order"
  done
  (cd "$t" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp" && mv "$INITRD.tmp" "$INITRD" || fail "cpio"
  rm -rf "$t"
  for f in "$CACHE"/initramfs-*.cpio.gz; do [ "$f" = "$INITRD" ] || rm -f "$f"; done   # stale ones
}

exec 9>"$CACHE/.lock"
flock -w 900 9 || fail "cannot lock $CACHE/.lock"
prepare_kernel
prepare_initramfs
flock -u 9
KREL=$(ls "$KROOT/lib/modules" | head -n1)

# --- the run directory: config, command, results, exit status ---------------
RUN=$(mktemp -d "${TMPDIR:-/tmp}/gst-npu-rk.XXXXXX") || fail "mktemp"
case "$RUN" in /run/*|/dev/*) rm -rf "$RUN"; RUN=$(mktemp -d "$CACHE/run.XXXXXX") || fail "mktemp";; esac
QPID=""
cleanup() { [ -n "$QPID" ] && kill "$QPID" 2>/dev/null; rm -rf "$RUN"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$RUN/rk"
if [ -n "$RES" ]; then
  mkdir -p "$RES" || fail "cannot create $RES"; RES=$(abspath "$RES")
else
  RES=$RUN/results; mkdir -p "$RES"
fi

# shares at their host paths, outer before inner (the build dir may be inside
# the source dir)
SHARES=$(printf '%s\n' "$SRC" "$BLD" | awk 'NF' | sort -u | awk '{print length, $0}' | sort -n | cut -d' ' -f2-)
{
  printf 'RK_MODS=%q\n' "$MODS"
  printf 'RK_SHARES=%q\n' "$(echo $SHARES)"
} > "$RUN/rk/config"
{
  echo 'export RK_RESULTS=/run/rk/results'
  for v in "${FWD[@]}"; do [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"; done
  printf 'cd %q || exit 125\n' "$WD"
  printf '%q ' "$@"; echo
} > "$RUN/rk/cmd.sh"
mkdir -p "$RUN/rk/results"

VIRTFS=(-virtfs "local,path=$RUN/rk,mount_tag=rk,security_model=none"
        -virtfs "local,path=/usr,mount_tag=usr,security_model=none,readonly=on,multidevs=remap"
        -virtfs "local,path=/etc,mount_tag=etc,security_model=none,readonly=on,multidevs=remap"
        -virtfs "local,path=$KROOT/lib/modules/$KREL,mount_tag=kmods,security_model=none,readonly=on")
i=0
for p in $SHARES; do
  VIRTFS+=(-virtfs "local,path=$p,mount_tag=share$i,security_model=none,readonly=on,multidevs=remap"); i=$((i+1))
done

ACCEL=(-accel tcg,thread=multi -cpu max)
[ "${GST_NPU_RK_KVM:-0}" = 1 ] && ACCEL=(-enable-kvm -cpu host)

T0=$(date +%s.%N)
timeout -k 10 "$TMO" "$QEMU" "${ACCEL[@]}" -smp "${GST_NPU_RK_SMP:-2}" -m "${GST_NPU_RK_MEM:-1024}" \
  -machine pc -display none -monitor none -serial stdio -no-reboot -nodefaults \
  -kernel "$KROOT/boot/vmlinuz-$KREL" -initrd "$INITRD" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init" \
  "${VIRTFS[@]}" </dev/null &
QPID=$!
wait $QPID; QRC=$?; QPID=""
T1=$(date +%s.%N)
# the results written by the guest go to RES when it is the caller's
if [ "$RES" != "$RUN/results" ]; then cp -a "$RUN/rk/results/." "$RES/" 2>/dev/null; fi
echo "$ME: guest ran $(echo "$T1 - $T0" | LC_ALL=C awk '{printf "%.1f", $1 - $3}')s" >&2
if [ $QRC -eq 124 ] || [ $QRC -eq 137 ]; then echo "$ME: timeout after ${TMO}s" >&2; exit 124; fi
[ -s "$RUN/rk/rc" ] || fail "guest produced no exit status (qemu exit $QRC)"
exit "$(cat "$RUN/rk/rc")"
