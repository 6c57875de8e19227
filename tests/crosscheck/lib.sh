# Shared by the cross-check scripts (sourced): the two builds they all
# start with.

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
