# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared by the cross-check scripts (sourced): the two builds they all
# start with, and the PASS / FAIL lines and counts of run.sh and vision.sh.

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
