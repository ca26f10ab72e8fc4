#!/bin/bash
# train_cli_checks.sh — the train CLI's handling of hostile input and failing outputs (issue 15):
# every case must end with the stated exit status and a message naming the problem.
#
#   tests/examples/train_cli_checks.sh TRAIN [DATA_DIR]
#
# Without DATA_DIR (Fashion-MNIST) only the cases that fail before the data loads run.
set -u
train=$(realpath "$1")
data=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect STATUS REGEX ARGS...: runs train ARGS, checks the exit status and that stderr matches REGEX.
expect() {
  local want=$1 regex=$2
  shift 2
  "$train" "$@" > "$tmp/out" 2> "$tmp/err"
  local got=$?
  if [ "$got" -ne "$want" ] || ! grep -Eq -- "$regex" "$tmp/err"; then
    echo "FAIL: train $* -> exit $got (want $want), stderr: $(cat "$tmp/err")"
    failures=$((failures + 1))
  else
    echo "ok: train $* -> exit $got: $(head -c 200 "$tmp/err")"
  fi
}

# --- before any data: a bad output or flag fails at once (the data directory does not exist) ---
nodata=(--data-dir "$tmp/no-such-dir")
for flag in --csv --step-csv --memory-csv; do
  expect 1 "cannot write '/dev/full': No space left on device" "${nodata[@]}" "$flag" /dev/full
  expect 1 "cannot open '$tmp/missing/out.csv': No such file or directory" "${nodata[@]}" "$flag" "$tmp/missing/out.csv"
done
expect 1 "cannot open '$tmp/missing/t.csv'" "${nodata[@]}" --assignment qm-qe --dc-tensor-csv "$tmp/missing/t.csv"
expect 2 "--width: must be at most 8, got 1e300" "${nodata[@]}" --width 1e300
expect 2 "--width: must be at most 8, got 1e6" "${nodata[@]}" --width 1e6
expect 2 "--width: must be positive, got -1" "${nodata[@]}" --width -1
expect 2 "--epochs: must be at most 10000" "${nodata[@]}" --epochs 18446744073709551615
expect 2 "--batch-size: must be at most 60000" "${nodata[@]}" --batch-size 1000000
expect 2 "--threads: must be at most 256" "${nodata[@]}" --threads 100000
expect 2 "--growth-interval: must be at most" "${nodata[@]}" --growth-interval 18446744073709551615
expect 2 "--dc-bw-history: must be at most 1000000" "${nodata[@]}" --assignment bitwave --dc-bw-history 1000000000000
expect 2 "--init-scale: must be at most 3.40282e\+38, got 1e300" "${nodata[@]}" --init-scale 1e300
expect 2 "--format: .*mantissa_bits = 30" "${nodata[@]}" --assignment fixed --format 'fp(9,30,1)'
expect 2 "--weights low\+k cannot take a block format as --visible \(mxfp8-e4m3\).*grid moves" "${nodata[@]}" \
  --weights low+8 --visible mxfp8-e4m3
expect 2 "--visible: nvfp4: its per-tensor scale" "${nodata[@]}" --weights low-only --visible nvfp4
expect 2 "--visible and --split apply to --weights low-only and low\+k only" "${nodata[@]}" --visible mxfp4
expect 2 "--epochs: At Most 1 required but received 2" "${nodata[@]}" --epochs 1 --epochs 2
expect 2 "--csv: At Most 1 required but received 2" "${nodata[@]}" --csv "$tmp/a.csv" --csv="$tmp/b.csv"
expect 2 "--fused-update: At Most 1 required but received 2" "${nodata[@]}" --fused-update --fused-update
expect 2 "unknown flag '--no-such-flag'" "${nodata[@]}" --no-such-flag 1
expect 2 "--epochs: 1 required N missing" "${nodata[@]}" --epochs
expect 2 "unexpected argument 'stray'" "${nodata[@]}" stray
expect 2 "--model: expects one of mlp, cnn, got 'resnet'" "${nodata[@]}" --model resnet
expect 2 "--dc-sign: expects one of omit, always, got 'never'" "${nodata[@]}" --assignment qm-qe --dc-sign never
expect 2 "--ratio: must be in \[0, 1\], got nan" "${nodata[@]}" --ratio nan
expect 2 "--seed: expects a whole number, got '-1'" "${nodata[@]}" --seed=-1
expect 2 "quiet was given a disallowed flag override" "${nodata[@]}" --quiet=yes
[ -e "$tmp/a.csv" ] && { echo "FAIL: a rejected command line created its output"; failures=$((failures + 1)); }
# Every flag the help lists is one the parser knows (each is declared once, with its help).
for flag in $("$train" --help | grep -oE '^  --[a-z0-9-]+' | sort -u); do
  (cd "$tmp" && "$train" "${nodata[@]}" "$flag" 0 > /dev/null 2> "$tmp/err")  # output flags create ./0 there
  if grep -q "unknown flag" "$tmp/err"; then
    echo "FAIL: $flag is in the help but unknown to the parser"
    failures=$((failures + 1))
  fi
done

if [ -n "$data" ]; then
  # --- an update the --visible format cannot store: the error names the step, the format and the tensor
  expect 1 "step 1 \(epoch 1\), --visible paper_fp\(6,9,0\).*tensor fc1\.weight.*NaN.*nothing was changed" \
    --data-dir "$data" --quiet --train-limit 1024 --test-limit 256 --epochs 1 --weights low-only \
    --visible 'fp(6,9,0)' --loss-scaling off --lr 1e30

  # --- SIGINT / SIGTERM: stop at a step boundary, every CSV whole ---
  for sig in INT TERM; do
    want=$([ $sig = INT ] && echo 130 || echo 143)
    rm -f "$tmp/e.csv" "$tmp/s.csv" "$tmp/m.csv"
    "$train" --data-dir "$data" --quiet --model mlp --train-limit 8192 --test-limit 512 --epochs 50 \
      --csv "$tmp/e.csv" --step-csv "$tmp/s.csv" --memory-csv "$tmp/m.csv" > "$tmp/out" 2> "$tmp/err" &
    pid=$!
    # Wait until an epoch has finished and the next is under way, then signal.
    for _ in $(seq 1 1800); do
      [ -f "$tmp/e.csv" ] && [ "$(wc -l < "$tmp/e.csv")" -ge 2 ] && [ "$(wc -l < "$tmp/s.csv")" -ge 80 ] && break
      sleep 0.1
    done
    kill -s $sig $pid
    wait $pid
    got=$?
    bad=$(awk -F, 'NR > 1 && NF != 17' "$tmp/e.csv"; awk -F, 'NR > 1 && NF != 8' "$tmp/s.csv")
    if [ "$got" -ne "$want" ] || ! grep -q "stopped by SIG$sig" "$tmp/err" || [ -n "$bad" ] ||
       [ "$(head -c 6 "$tmp/e.csv")" != "epoch," ] || [ "$(head -c 6 "$tmp/s.csv")" != "epoch," ] ||
       [ "$(tail -c 1 "$tmp/s.csv" | od -An -c | tr -d ' ')" != '\n' ] || [ "$(wc -l < "$tmp/m.csv")" -ne 2 ]; then
      echo "FAIL: SIG$sig -> exit $got (want $want), stderr: $(cat "$tmp/err"), malformed rows: $bad"
      failures=$((failures + 1))
    else
      echo "ok: SIG$sig -> exit $got, $(($(wc -l < "$tmp/e.csv") - 1)) epoch rows, $(($(wc -l < "$tmp/s.csv") - 1)) step rows, memory row written"
    fi
  done
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all cases passed"
