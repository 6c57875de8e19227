#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds llama.cpp (CPU only) for the cross-check, from the source that the
# node-llama-cpp npm package carries (package/llama/gitRelease.bundle, a git
# bundle of llama.cpp), and the reference programs against it: llama-greedy
# (text models, run.sh), clip-encode (mmproj vision encoders, vision.sh),
# mtmd-audio-encode (audio mmproj files through libmtmd, audio.sh),
# mtmd-caption (an image and a prompt through libmtmd, greedy, trained.sh)
# and mtmd-audio-caption (a sound and a prompt, greedy, trained.sh).
#
#   tests/crosscheck/build-llamacpp.sh        (needs npm, git, cmake, a C/C++
#                                             compiler; Debian 12: apt-get
#                                             install npm git cmake g++)
#
# Environment: LLAMACPP_DIR (/tmp/llamacpp) is where everything goes:
#   node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz, src/ (the clone), build/
#   (bin/llama-bench, llama-simple, llama-completion, llama-eval-callback,
#   llama-quantize (the presets of run.sh's type cases),
#   llama-tokenize and the shared libraries, libmtmd among them),
#   llama-greedy, llama-ttft, clip-encode, mtmd-audio-encode, mtmd-caption,
#   mtmd-audio-caption.
# NODE_LLAMA_CPP_VERSION (3.22.1) picks the npm package, so the llama.cpp
# revision: 3.22.1 carries llama.cpp 0.5.0-dev, commit de3ff81 (the bundle
# is one squashed commit, so `git describe` and the build number say
# little; llama-bench --version prints both).
# JOBS (2) is the parallel build jobs.  Steps already done are skipped.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
VERSION=${NODE_LLAMA_CPP_VERSION:-3.22.1}
JOBS=${JOBS:-2}
TGZ=$DIR/node-llama-cpp-$VERSION.tgz

mkdir -p "$DIR"

# 1. the npm package (a tarball; nothing is installed, no script runs)
if [ ! -f "$TGZ" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-llama-cpp@$VERSION" >/dev/null)
  mv "$tmp/node-llama-cpp-$VERSION.tgz" "$TGZ"
  rmdir "$tmp"
fi

# 2. the llama.cpp source, cloned from the bundle
if [ ! -d "$DIR/src/.git" ]; then
  tmp=$(mktemp -d)
  tar -xzf "$TGZ" -C "$tmp" package/llama/gitRelease.bundle
  git -c advice.detachedHead=false clone -q \
      "$tmp/package/llama/gitRelease.bundle" "$DIR/src"
  rm -rf "$tmp"
fi
echo "llama.cpp source: $(git -C "$DIR/src" log -1 --format='%h %cd' \
    --date=short) (from node-llama-cpp $VERSION)"

# 3. CPU-only Release build with native SIMD, no CURL/OpenSSL, shared libs,
#    only the programs we use (mtmd, the library holding clip.cpp, is built
#    with the tools)
if [ ! -f "$DIR/build/CMakeCache.txt" ]; then
  gen=
  if command -v ninja >/dev/null 2>&1; then
    gen="-G Ninja"
  fi
  # shellcheck disable=SC2086
  cmake -S "$DIR/src" -B "$DIR/build" $gen -DCMAKE_BUILD_TYPE=Release \
      -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
      -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=ON >"$DIR/cmake.log"
fi
cmake --build "$DIR/build" -j"$JOBS" --target llama-bench llama-simple \
    llama-completion llama-eval-callback llama-tokenize llama-quantize mtmd \
    >"$DIR/build.log"

# 4. the reference side of the cross-checks
cc -O2 -Wall -o "$DIR/llama-greedy" "$HERE/llama-greedy.c" \
    -I"$DIR/src/include" -I"$DIR/src/ggml/include" -L"$DIR/build/bin" \
    -lllama -lggml -lggml-base -Wl,-rpath,"$DIR/build/bin"
cc -O2 -Wall -o "$DIR/llama-ttft" "$HERE/llama-ttft.c" \
    -I"$DIR/src/include" -I"$DIR/src/ggml/include" -L"$DIR/build/bin" \
    -lllama -lggml -lggml-base -Wl,-rpath,"$DIR/build/bin"
# clip.h and clip-impl.h are mtmd's internal headers: their unused static
# helpers would warn
c++ -O2 -Wall -Wno-unused-function -std=c++17 -o "$DIR/clip-encode" \
    "$HERE/clip-encode.cpp" -I"$DIR/src/tools/mtmd" -I"$DIR/src/include" \
    -I"$DIR/src/ggml/include" -L"$DIR/build/bin" -lmtmd -lllama -lggml \
    -lggml-base -Wl,-rpath,"$DIR/build/bin"
# The two caption programs share their llama.cpp set-up and greedy answer
# (mtmd-common.c, C, linked into both); mtmd's public C API (mtmd.h,
# mtmd-helper.h) but for mtmd-audio-caption's clip.h and mtmd-audio.h.
cc -O2 -Wall -c -o "$DIR/mtmd-common.o" "$HERE/mtmd-common.c" \
    -I"$DIR/src/tools/mtmd" -I"$DIR/src/include" -I"$DIR/src/ggml/include"
c++ -O2 -Wall -Wno-unused-function -std=c++17 -o "$DIR/mtmd-audio-caption" \
    "$HERE/mtmd-audio-caption.cpp" "$DIR/mtmd-common.o" \
    -I"$DIR/src/tools/mtmd" -I"$DIR/src/include" -I"$DIR/src/ggml/include" \
    -L"$DIR/build/bin" -lmtmd -lllama -lggml -lggml-base \
    -Wl,-rpath,"$DIR/build/bin"
cc -O2 -Wall -o "$DIR/mtmd-caption" "$HERE/mtmd-caption.c" \
    "$DIR/mtmd-common.o" -I"$DIR/src/tools/mtmd" -I"$DIR/src/include" \
    -I"$DIR/src/ggml/include" -L"$DIR/build/bin" -lmtmd -lllama -lggml \
    -lggml-base -Wl,-rpath,"$DIR/build/bin"
cc -O2 -Wall -o "$DIR/mtmd-audio-encode" "$HERE/mtmd-audio-encode.c" \
    -I"$DIR/src/tools/mtmd" -I"$DIR/src/include" -I"$DIR/src/ggml/include" \
    -L"$DIR/build/bin" -lmtmd -lllama -lggml -lggml-base \
    -Wl,-rpath,"$DIR/build/bin"

"$DIR/build/bin/llama-bench" --version 2>&1 | head -n 1
