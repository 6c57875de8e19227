#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The aarch64 build as a user meets it, run under qemu-user with Debian's
# own arm64 gst-inspect-1.0 and gst-launch-1.0 (unpacked under
# BUILD/arm64-tools by tests/cross/setup-aarch64.sh):
#   1. gst-inspect-1.0 lists the plugin's six elements, its device
#      provider and its tracer, and inspects each element;
#   2. the demo's trained-model part (examples/demo.sh, DEMO_ONLY=trained:
#      six videotestsrc frames and four sounds through npuvisiontok or
#      npuaudiotok into npullm) runs with the arm64 gst-launch-1.0 on the
#      aarch64 plugin, and each answer equals the x86 build's answer to
#      the same pipeline (the demo run again on the x86 build).
# Prints both answer lists and exits 1 on any difference or failure.
# Usage: tests/cross/demo-aarch64.sh [BUILD (build-aarch64)]
set -u
cd "$(dirname "$0")/../.."
build=${1:-build-aarch64}
tools=$(pwd)/$build/arm64-tools/usr/bin
failed=0

[ -x "$tools/gst-launch-1.0" ] ||
  { echo "demo-aarch64: no $tools/gst-launch-1.0 (run tests/cross/setup-aarch64.sh)"; exit 1; }

# One program of the arm64 tools under qemu-user: the emulated process
# loads the plugins itself (no binfmt_misc to start the arm64
# gst-plugin-scanner), with a registry of its own.
launcher=$(pwd)/$build/arm64-tools/qemu-gst
cat > "$launcher" <<EOF
#!/bin/sh
export GST_REGISTRY_FORK=no
export GST_REGISTRY_1_0=$(pwd)/$build/arm64-tools/registry.bin
exec qemu-aarch64 -L / -cpu "\${QEMU_CPU:-max}" "$tools/\$(basename "\$0")" "\$@"
EOF
chmod +x "$launcher"
ln -sf qemu-gst "$build/arm64-tools/gst-inspect-1.0"
ln -sf qemu-gst "$build/arm64-tools/gst-launch-1.0"
inspect=$(pwd)/$build/arm64-tools/gst-inspect-1.0

export GST_PLUGIN_PATH="$(pwd)/$build/gst/elements"
features=$("$inspect" npu 2>&1)
echo "$features" | sed -n '/features:/,$p'
for want in "6 elements" "1 device providers" "1 tracers"; do
  echo "$features" | grep -q -- "+-- $want" ||
    { echo "demo-aarch64: gst-inspect-1.0 npu: no \"$want\""; failed=1; }
done
for e in mxfp4weights npuvisiontok npuaudiotok npullm nputokenpay \
    nputokendepay; do
  if "$inspect" "$e" > "$build/arm64-tools/inspect-$e.txt" 2>&1 &&
      grep -q "Factory Details" "$build/arm64-tools/inspect-$e.txt"; then
    echo "gst-inspect-1.0 $e: $(grep -c '^  [a-z-]* *: ' \
        "$build/arm64-tools/inspect-$e.txt") property lines"
  else
    echo "demo-aarch64: gst-inspect-1.0 $e failed:"
    cat "$build/arm64-tools/inspect-$e.txt"
    failed=1
  fi
done
unset GST_PLUGIN_PATH

# The answers alone (the demo's lines also carry each run's timings)
answers() {
  grep ' -> ' "$1" | sed 's/ *(first token.*//'
}
DEMO_ONLY=trained ./examples/demo.sh > "$build/demo-x86.txt" 2>&1 ||
  { echo "demo-aarch64: the x86 demo failed:"; cat "$build/demo-x86.txt"; exit 1; }
DEMO_ONLY=trained DEMO_BUILD=$build \
  DEMO_LAUNCH=$(pwd)/$build/arm64-tools/gst-launch-1.0 \
  ./examples/demo.sh > "$build/demo-aarch64.txt" 2>&1 ||
  { echo "demo-aarch64: the aarch64 demo failed:"; cat "$build/demo-aarch64.txt"; exit 1; }
echo "== aarch64 (qemu-user):"
grep ' -> ' "$build/demo-aarch64.txt"
answers "$build/demo-x86.txt" > "$build/demo-x86.answers"
answers "$build/demo-aarch64.txt" > "$build/demo-aarch64.answers"
n=$(wc -l < "$build/demo-x86.answers")
if [ "$n" -lt 10 ]; then
  echo "demo-aarch64: only $n answers from the x86 demo, 10 expected"
  failed=1
elif ! diff "$build/demo-x86.answers" "$build/demo-aarch64.answers"; then
  echo "demo-aarch64: the aarch64 answers differ from x86's (above: < x86, > aarch64)"
  failed=1
else
  echo "demo-aarch64: the $n answers equal x86's"
fi
exit $failed
