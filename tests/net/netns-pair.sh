#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Tokens across two hosts: two network namespaces joined by a veth pair,
# the encoder (videotestsrc ! npuvisiontok ! nputokenpay ! tcpserversink)
# in one, the decoder (tcpclientsrc ! nputokendepay ! npullm) in the
# other, on the committed trained models.  The decoder's answer must be
# the one the same frame gets in a single pipeline.  Needs root (ip netns).
#
#   tests/net/netns-pair.sh [BUILD_DIR]
#
# Exits 0 on a match, 1 on a mismatch or failure, 77 where it cannot run
# (not root, no ip netns).
set -eu

src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
models=$src/tests/models
export GST_PLUGIN_PATH="$build/gst/elements"
export LD_LIBRARY_PATH="$build/gst/npu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tag=npu$$
enc=$tag-enc
dec=$tag-dec
port=5700
frame="videotestsrc num-buffers=1 pattern=ball foreground-color=0xff2020ff"
frame="$frame ! video/x-raw,format=NV12,width=320,height=240"
llm="npullm name=llm model=$models/videotestsrc-text.gguf prompt=\"What do you see?\""
llm="$llm max-tokens=24 ! fdsink"

if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "netns-pair: SKIP: needs root and ip netns"
  exit 77
fi

tmp=$(mktemp -d)
cleanup () {
  [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null || true
  ip netns del "$enc" 2>/dev/null || true
  ip netns del "$dec" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$enc"
ip netns add "$dec"
# Commands enter a namespace by nsenter, not "ip netns exec" or "ip -n":
# those also make / a slave mount, which fails in a chroot whose / is no
# mount point (the Debian 13 leg's root).
in_enc="nsenter --net=/run/netns/$enc"
in_dec="nsenter --net=/run/netns/$dec"
ip link add "$tag-a" type veth peer name "$tag-b"
ip link set "$tag-a" netns "$enc"
ip link set "$tag-b" netns "$dec"
$in_enc ip addr add 10.77.0.1/24 dev "$tag-a"
$in_dec ip addr add 10.77.0.2/24 dev "$tag-b"
for run in "$in_enc" "$in_dec"; do $run ip link set lo up; done
$in_enc ip link set "$tag-a" up
$in_dec ip link set "$tag-b" up

# The reference: the same frame in one pipeline
eval gst-launch-1.0 -q "$frame" ! \
  npuvisiontok model="$models/videotestsrc-mmproj.gguf" ! llm.vision \
  "$llm" > "$tmp/local.txt"

# tcpserversink sends only to the clients connected by then: the encoder
# holds its frame a second (identity) and the decoder connects as soon as
# the port listens (a live camera would simply start with the next frame).
eval $in_enc gst-launch-1.0 -q "$frame" ! \
  npuvisiontok model="$models/videotestsrc-mmproj.gguf" ! \
  nputokenpay ! queue ! identity sleep-time=1000000 ! \
  tcpserversink host=10.77.0.1 port=$port > "$tmp/enc.log" 2>&1 &
spid=$!
i=0
# listening: the client connects well within the second the frame is held
until $in_enc ss -Htln "sport = :$port" | grep -q . ||
    [ $i -ge 100 ]; do
  sleep 0.1; i=$((i + 1))
done
eval $in_dec timeout 60 gst-launch-1.0 -q \
  tcpclientsrc host=10.77.0.1 port=$port ! nputokendepay ! llm.vision \
  "$llm" > "$tmp/remote.txt" &
cpid=$!
wait "$spid" || true
spid=
# tcpserversink keeps its clients after EOS; the encoder's exit closes the
# connection and the decoder ends
wait "$cpid" || { echo "netns-pair: FAIL: the decoder failed"; exit 1; }

echo "netns-pair: local:  $(cat "$tmp/local.txt")"
echo "netns-pair: remote: $(cat "$tmp/remote.txt")"
if [ ! -s "$tmp/local.txt" ] || ! cmp -s "$tmp/local.txt" "$tmp/remote.txt"
then
  echo "netns-pair: FAIL: the answers differ"
  exit 1
fi
echo "netns-pair: PASS"
