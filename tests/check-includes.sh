#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Checks the include graph of gst/ and ext/ (run by tests/check-style.sh):
#  - layers: ext/drm, then gst/core (with its subfolders device, cpu,
#    formats, text, models), gst/npu, gst/elements; a file includes files of
#    its own layer or a lower one only (gst/npu never gst/elements, gst/core
#    never gst/npu), so the directories form no circle;
#  - gst/core and ext/drm include no GStreamer header (GLib only);
#  - no circle between modules (foo.c and foo.h are one module: the
#    allocator including the importer's header while the importer includes
#    the allocator's is a circle, though no header includes itself).
# Prints each violation and exits 1; run from anywhere.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

files=$(git ls-files 'gst/*.[ch]' 'ext/*.[ch]' 2>/dev/null ||
    find gst ext -name '*.[ch]')

# layer DIR: the rank of a project directory, lowest first.
layer() {
  case "$1" in
    ext/*) echo 0 ;;
    gst/core | gst/core/*) echo 1 ;;
    gst/npu) echo 2 ;;
    gst/elements) echo 3 ;;
    *) echo 9 ;;
  esac
}

# "FILE TARGET" for each project file FILE includes; TARGET is "gst:NAME"
# for a GStreamer header (<gst/...> that is not ours).  A quoted name is
# looked up beside the file first, then, as the build's include paths are,
# under gst/ and the top directory.
for f in $files; do
  dir=$(dirname "$f")
  sed -n 's/^[ \t]*#[ \t]*include[ \t]*\([<"]\)\([^>"]*\)[>"].*/\1 \2/p' "$f" |
  while read -r quote name; do
    if [ "$quote" = '"' ] && [ -f "$dir/$name" ]; then
      echo "$f $dir/$name"
    elif [ -f "gst/$name" ]; then
      echo "$f gst/$name"
    elif [ -f "$name" ]; then
      echo "$f $name"
    else
      case "$name" in
        gst/*) echo "$f gst:$name" ;;
      esac
    fi
  done
done > "$tmp/edges"

bad=0
while read -r from to; do
  fdir=$(dirname "$from")
  case "$to" in
    gst:*)
      case "$fdir" in
        gst/core | gst/core/* | ext/*)
          echo "check-includes: $from includes the GStreamer header ${to#gst:}" \
              "(only GLib below gst/npu)"
          bad=1 ;;
      esac
      continue ;;
  esac
  tdir=$(dirname "$to")
  if [ "$(layer "$tdir")" -gt "$(layer "$fdir")" ]; then
    echo "check-includes: $from includes $to, from a higher layer" \
        "(ext/drm < gst/core < gst/npu < gst/elements)"
    bad=1
  fi
done < "$tmp/edges"

# Modules: a file's path without .c or .h (a foo-private.h is part of
# foo).  tsort reports a loop on stderr.
grep -v ' gst:' "$tmp/edges" |
    sed 's/\.[ch] / /; s/\.[ch]$//; s/-private / /; s/-private$//' |
    awk '$1 != $2' > "$tmp/modules"
if ! tsort < "$tmp/modules" > /dev/null 2> "$tmp/loops"; then
  echo "check-includes: include circle between modules:"
  sed 's/^tsort: -: /  /; s/^tsort: /  /' "$tmp/loops"
  bad=1
fi
[ "$bad" = 0 ] && echo "check-includes: layers, GLib-only core, no circle: ok"
exit "$bad"
