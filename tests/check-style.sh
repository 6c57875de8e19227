#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Checks that every C file under gst/ and ext/ is in GStreamer's gst-indent
# style (GNU indent with the flags of gstreamer/scripts/gst-indent, applied
# twice as that script's users do, since one pass of indent is not always
# stable), that every source file carries an SPDX licence line, that no
# function in gst/ or ext/ is longer than 120 lines (tests/function-lengths.sh:
# a longer one is split along its own phases), and that gst/'s include graph
# keeps its layers and has no circle (tests/check-includes.sh).
# Prints what is wrong and exits 1; run from anywhere.
set -u
cd "$(dirname "$0")/.."
command -v indent >/dev/null || { echo "check-style: indent is not installed"; exit 1; }

gst_indent() {
  indent --braces-on-if-line --case-brace-indentation0 --case-indentation2 \
    --braces-after-struct-decl-line --line-length80 --no-tabs --cuddle-else \
    --dont-line-up-parentheses --continuation-indentation4 --honour-newlines \
    --tab-size8 --indent-level2 --leave-preprocessor-space "$@"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
for f in $(git ls-files 'gst/*.c' 'ext/*.c' 2>/dev/null || find gst ext -name '*.c'); do
  gst_indent "$f" -o "$tmp/a.c" 2>/dev/null && gst_indent "$tmp/a.c" -o "$tmp/b.c" 2>/dev/null
  if ! cmp -s "$f" "$tmp/b.c"; then
    echo "check-style: $f is not in gst-indent style:"
    diff -u "$f" "$tmp/b.c" | head -20
    bad=1
  fi
done
for f in $(git ls-files '*.c' '*.h' '*.cpp' '*.sh' '*.py' 'meson.build' '*/meson.build' '.ci/run' 2>/dev/null); do
  head -n 3 "$f" | grep -q 'SPDX-License-Identifier: LGPL-2.1-or-later' || {
    echo "check-style: $f has no SPDX-License-Identifier line in its first 3 lines"
    bad=1
  }
done
MAX=120 ./tests/function-lengths.sh > "$tmp/long" || {
  while read -r lines where name; do
    echo "check-style: $name ($where) is $lines lines long, more than 120"
  done < "$tmp/long"
  bad=1
}
./tests/check-includes.sh || bad=1
[ "$bad" = 0 ] && echo "check-style: gst-indent style, SPDX lines, function lengths: ok"
exit "$bad"
