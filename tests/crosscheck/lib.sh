# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared by the cross-check scripts (sourced): the two builds they all
# start with, the PASS / FAIL lines and counts of run.sh, vision.sh and
# audio.sh, and the encoders' float64 verdict.

# build_llamacpp: llama.cpp and its driver programs in LLAMACPP_DIR
build_llamacpp () {
  echo "== building llama.cpp"
  "$HERE/build-llamacpp.sh"
}

# build_tools BUILD SRC LOG_DIR TARGET...: a meson build of SRC in BUILD
# (set up if missing) and the ninja TARGETs; logs in LOG_DIR
build_tools () {
  local build=$1 src=$2 logs=$3
  shift 3
  echo "== building gst-npu's tools in $build"
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$src" >"$logs/meson-setup.log"
  fi
  ninja -C "$build" "$@" >"$logs/ninja.log"
}

passed=0
failed=0
pass () { echo "PASS  $*"; passed=$((passed + 1)); }
fail () { echo "FAIL  $*"; failed=$((failed + 1)); }

# judge NAME ISA TOL RC PROGRAM ERR_LOG SUMMARY DETAIL: the verdict on one
# case from our side's run: PROGRAM failed outright when it printed no
# SUMMARY, TOL "info" only prints, else its exit status RC decides.
# DETAIL follows "NAME [ISA, tol TOL]" on the line.
judge () {
  local name=$1 isa=$2 tol=$3 rc=$4 program=$5 err=$6 summary=$7 detail=$8
  if [ -z "$summary" ]; then
    fail "$name: $program failed (see $err)"
  elif [ "$tol" = info ]; then
    echo "INFO  $name [$isa]$detail"
  elif [ "$rc" -eq 0 ]; then
    pass "$name [$isa, tol $tol]$detail"
  else
    fail "$name [$isa, tol $tol]$detail"
  fi
}

# f64_verdict LOG TOL: from the "f64 ours/ref" lines an encode tool's --f64
# printed into LOG, "float64: ours E (tol TOL), llama.cpp E; relative norm:
# ours N, llama.cpp N"; false when ours is missing, a NaN or above TOL
f64_verdict () {
  local ours ref normours normref
  ours=$(sed -n 's/^f64 ours: .*rel //p' "$1")
  ref=$(sed -n 's/^f64 ref: .*rel //p' "$1")
  normours=$(sed -n 's/^f64 ours norm: relative norm //p' "$1")
  normref=$(sed -n 's/^f64 ref norm: relative norm //p' "$1")
  echo "float64: ours ${ours:-?} (tol $2), llama.cpp ${ref:-?}; relative" \
      "norm: ours ${normours:-?}, llama.cpp ${normref:-?}"
  awk -v e="${ours:-none}" -v t="$2" \
      'BEGIN { exit !(e ~ /^[0-9.]+e[-+][0-9]+$/ && e + 0 <= t + 0) }'
}
