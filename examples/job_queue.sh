# job_queue.sh — sourced by reproduce.sh and reproduce_dynamic.sh: runs jobs in the background,
# at most $jobs at a time, and remembers whether any failed.
#   queue_slot      before starting a job: waits until fewer than $jobs are running
#   queue_started   after starting it with `&`
#   queue_finish    waits for every job; exits 1 (naming $out, where the logs are) if any failed
#   run_finished CSV EPOCHS   true when a run's per-epoch CSV already holds all its epochs (an
#                   interrupted reproduction resumes where it stopped)
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
  [ -f "$1" ] && [ "$(($(wc -l < "$1") - 1))" -ge "$2" ]
}
