#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Prints the length in lines of every function defined in the C files given
# (or, without arguments, in every C file under gst/ and ext/), longest
# first: "LINES FILE:LINE FUNCTION".  With MAX set in the environment, prints
# only the functions longer than MAX lines and exits 1 if there is one.
#
# It relies on gst-indent's layout, which tests/check-style.sh enforces: a
# function's name starts a line at column 0 ("name (args"), its body opens
# with "{" alone at column 0 and closes with "}" alone at column 0.  The
# length counts from the name's line to the closing brace.
set -u
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- $(git ls-files 'gst/*.c' 'ext/*.c' 2>/dev/null ||
    find gst ext -name '*.c')
max=${MAX:-0}
awk '
  FNR == 1 { name = ""; inbody = 0 }
  # Outside a body, a line ending in ";" closes a declaration: a prototype
  # whose name line was taken for a definition is forgotten.
  !inbody && /;[ \t]*$/ { name = "" }
  !inbody && /^[A-Za-z_][A-Za-z0-9_]* ?\(/ {
    name = $0; sub(/ ?\(.*/, "", name); start = FNR
  }
  !inbody && /^\{[ \t]*$/ { if (name != "") inbody = 1; next }
  inbody && /^\}/ {
    printf "%d %s:%d %s\n", FNR - start + 1, FILENAME, start, name
    inbody = 0; name = ""
  }
' "$@" | sort -k1,1nr | awk -v max="$max" '
  max == 0 { print; next }
  $1 > max { print; over = 1 }
  END { exit over ? 1 : 0 }
'
