#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# tests/tools/npu-answer-repeat.sh: are the trained models' answers the same
# in every run?  (docs/testing.md, "Answers that do not depend on luck")
#
#   tests/tools/npu-answer-repeat.sh [-n RUNS] [-C BUILD] [-d]
#
# Runs the end-to-end answer tests (trained-models, trained-audio) RUNS
# times (default 20) with NPU_PRINT_ANSWERS=1, so that every answer is
# printed, right or wrong; with -d, also examples/demo.sh's named frames and
# sounds (DEMO_ONLY=trained) RUNS times.  Then prints each run's tallies
# ("LEG: N of M answers right"), every case whose answer was not the same
# in all runs with each answer and how often, and the worst tally of each
# leg.  Exit status 1 when an answer changed or a test failed, else 0.
# Inside the Debian 13 root: tests/trixie/run.sh -- tests/tools/npu-answer-repeat.sh
set -eu
RUNS=20
BUILD=build
DEMO=
while getopts n:C:d opt; do
  case $opt in
    n) RUNS=$OPTARG ;;
    C) BUILD=$OPTARG ;;
    d) DEMO=1 ;;
    *) echo "usage: $0 [-n RUNS] [-C BUILD] [-d]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT
failed=0
i=1
while [ "$i" -le "$RUNS" ]; do
  NPU_PRINT_ANSWERS=1 meson test -C "$BUILD" --no-rebuild --verbose \
    trained-models trained-audio > "$LOG/run-$i.log" 2>&1 || {
      echo "run $i: a test failed"; failed=1; }
  if [ -n "$DEMO" ]; then
    DEMO_ONLY=trained ./examples/demo.sh 2>&1 |
      sed -n 's/^\(.*[^ ]\) *-> \(.*[^ ]\) *(first token.*/demo: \1: "\2"/p' \
      > "$LOG/demo-$i.log"
  fi
  i=$((i + 1))
done

# "answer: LEG: INPUT: "ANSWER"" (right) or "LEG: INPUT: "ANSWER"..., want
# WORDS" (wrong): one line "LEG: INPUT<TAB>ANSWER" per case and run
cat "$LOG"/run-*.log "$LOG"/demo-*.log 2>/dev/null |
  sed -n 's/^\(answer: \)\{0,1\}\(\(sources\|dmabuf\|videotestsrc\|demo\): .*\): "\(.*\)"\(.*\)$/\2\t\4\5/p' |
  sed 's/, want .*$/ (wrong)/' > "$LOG/answers"

echo "== tallies, run by run"
grep -h 'answers right$' "$LOG"/run-*.log | sort | uniq -c
echo "== cases whose answer changed between runs"
changed=$(cut -f1 "$LOG/answers" | sort -u | while IFS= read -r c; do
    n=$(grep -F -- "$c	" "$LOG/answers" | cut -f2 | sort -u | wc -l)
    [ "$n" -gt 1 ] || continue
    echo "$c"
    grep -F -- "$c	" "$LOG/answers" | cut -f2 | sort | uniq -c | sed 's/^/    /'
  done)
if [ -n "$changed" ]; then
  echo "$changed"
  failed=1
else
  echo "none ($(cut -f1 "$LOG/answers" | sort -u | wc -l) cases, $RUNS runs)"
fi
echo "== the worst run of each leg"
grep -h 'answers right$' "$LOG"/run-*.log |
  awk '{ leg = $1; n = $2; if (!(leg in w) || n < w[leg]) { w[leg] = n; l[leg] = $0 } }
       END { for (k in l) print l[k] }'
exit $failed
