#!/usr/bin/env bash
# `grader serve` on the GPU machine, driven as a class would drive it (issue 31; docs/performance.md):
# tokens for STUDENTS students and a TA, the bundled correct example submitted by one student in
# test mode twice (its kernels cold, then warm) and in benchmark mode, then STUDENTS submissions
# queued at once in benchmark mode, served one at a time for timing; the staff queue at the end.
# Times from `grader submit` to its printed result; the server's GRADER_TRACE log in $OUT/serve.log.
#   OUT=/tmp/svc STUDENTS=10 PROBLEMS=gelu benchmarks/service_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/service-gpu}
STUDENTS=${STUDENTS:-10}
PROBLEMS=${PROBLEMS:-gelu}
PORT=${PORT:-8765}
DEVICE=${DEVICE:-cuda}  # cpu: the script's own check here (benchmark mode needs a GPU)
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
G="python3 -m grader.cli"
URL=http://127.0.0.1:$PORT
DB=$OUT/svc.sqlite
rm -f "$DB" "$OUT"/s*.log
printf 'student_id\n' > "$OUT/roster.csv"
for i in $(seq 0 $((STUDENTS - 1))); do echo "s$i" >> "$OUT/roster.csv"; done
$G tokens --db "$DB" --roster "$OUT/roster.csv" --staff ta --out "$OUT/tokens.csv" || exit 1
token() { python3 -c "import csv,sys; print(next(r['token'] for r in csv.DictReader(open(sys.argv[1])) if r['student_id'] == sys.argv[2]))" "$OUT/tokens.csv" "$1"; }
GRADER_TRACE=1 $G serve --db "$DB" --port "$PORT" --device "$DEVICE" --quota 100 > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 1 60); do python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "$URL/" 2>/dev/null && break; sleep 0.5; done
T0=$(token s0)
for run in "test, its kernels cold" "test, warm" ; do
  echo "== grader submit correct --mode test --problems $PROBLEMS ($run)"
  /usr/bin/time -f "submit to result: %e s" $G submit examples/submissions/correct --server "$URL" --token "$T0" \
      --problems "$PROBLEMS" --no-tests 2>&1 | tail -n 12
done
echo "== grader submit correct --mode benchmark --problems $PROBLEMS"
/usr/bin/time -f "submit to result: %e s" $G submit examples/submissions/correct --server "$URL" --token "$T0" \
    --problems "$PROBLEMS" --no-tests --mode benchmark 2>&1 | tail -n 12
echo "== $STUDENTS students submit at once (benchmark mode)"
started=$(date +%s.%N)
for i in $(seq 0 $((STUDENTS - 1))); do
  T=$(token "s$i")
  ( /usr/bin/time -f "s$i submit to result: %e s" $G submit examples/submissions/correct --server "$URL" --token "$T" \
      --problems "$PROBLEMS" --no-tests --mode benchmark > "$OUT/s$i.log" 2>&1 ) &
done
wait $(jobs -p | grep -v "^$SERVER$") 2>/dev/null
python3 -c "import sys,time; print(f'all {sys.argv[2]} results in {time.time() - float(sys.argv[1]):.1f} s')" "$started" "$STUDENTS"
grep -h "submit to result\|ratio\|score" "$OUT"/s*.log | head -n 40
echo "== the staff queue afterwards"
python3 -c "
import sys, urllib.request
req = urllib.request.Request(sys.argv[1] + '/api/staff/queue', headers={'Authorization': 'Bearer ' + sys.argv[2]})
print(urllib.request.urlopen(req, timeout=10).read().decode()[:3000])" "$URL" "$(token ta)"
echo "== every job: queued, started, finished (s after the first was queued), its gelu ratio and score"
python3 - "$DB" <<'PY'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "select id, person_id, mode, state, created_at, started_at, finished_at, result from jobs order by id").fetchall()
t0 = min(r[4] for r in rows)
for id_, who, mode, state, created, started, finished, result in rows:
    r = json.loads(result) if result else {}
    ratios = [f"{p['name']} {p['performance'].get('ratio_geomean') or 0:.3f}" for p in r.get("problems", []) if p.get("performance")]
    at = lambda t: f"{t - t0:7.1f}" if t else "      -"
    print(f"#{id_:<3} {who:<4} {mode:<9} {state:<7} {at(created)} {at(started)} {at(finished)}  score {r.get('score', '-')}  {', '.join(ratios)}")
PY
