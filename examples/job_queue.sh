# job_queue.sh — sourced by the reproduce*.sh scripts: runs jobs in the background, at most $jobs
# at a time, and remembers whether any failed.
#   queue_slot      before starting a job: waits until fewer than $jobs are running
#   queue_started   after starting it with `&`
#   queue_finish    waits for every job; exits 1 (naming $out, where the logs are) if any failed
#   run_finished CSV EPOCHS   true when a run's per-epoch CSV already holds all its epochs and its
#                   record (CSV without .csv, plus .json) exists: an interrupted reproduction
#                   resumes where it stopped
#   launch STEM EPOCHS ARGS...   one training run, unless finished: `$train ARGS...` under nice,
#                   through examples/run_record.py (output in STEM.log, record in STEM.json,
#                   written when the run succeeds); ARGS must write STEM.csv. With $dry_run = 1 it
#                   prints `plan: STEM.csv: TRAIN ARGS...` instead (examples/results_cpp.py prices
#                   the plan from these lines)
running=0
failed=0

queue_slot() {
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
}

queue_started() {
  running=$((running + 1))
}

queue_finish() {
  while [ "$running" -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
  done
  if [ "$failed" -ne 0 ]; then
    echo "$0: a training run failed; see the .log files under $out" >&2
    exit 1
  fi
}

run_finished() {
  [ -f "$1" ] && [ -f "${1%.csv}.json" ] && [ "$(($(wc -l < "$1") - 1))" -ge "$2" ]
}

launch() {
  local stem=$1 epochs=$2
  shift 2
  if [ "${dry_run:-0}" = 1 ]; then
    echo "plan: $stem.csv: $train $*"
    return 0
  fi
  if run_finished "$stem.csv" "$epochs"; then return 0; fi
  mkdir -p "$(dirname "$stem")"
  queue_slot
  echo "  ${stem#"$out"/}: train $*"
  nice python3 "$here/run_record.py" --json "$stem.json" --log "$stem.log" -- "$train" "$@" &
  queue_started
}
