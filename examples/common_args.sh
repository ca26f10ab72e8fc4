# common_args.sh — the argument preamble the example scripts share (compare.sh, reproduce.sh,
# reproduce_dynamic.sh, reproduce_no_master.sh): their one-letter options, -h printing the
# script's header comment, the usage line on a bad option, and the `train` executable.
#
#   . "$here/common_args.sh"
#   parse_args OPTSTRING HELP_LINES USAGE "$@"; shift "$args_parsed"
#
# OPTSTRING is getopts' (a subset of b:o:e:m:j:s:x:nh); each option sets the script's variable of
# the same meaning, whose default the script sets before: -b build (default: the newest build
# directory with a train executable), -o out, -e epochs, -m model, -j jobs, -s seeds, -x extra
# (flags passed to every run), -n dry_run=1 (list the runs, run nothing; no trainer needed).
# HELP_LINES is sed's range of the header comment (e.g. 2,14).
# Afterwards $train is the trainer and $args_parsed the number of arguments the options took.
# shellcheck source=examples/find_train.sh
. "$here/find_train.sh"
build=""
dry_run=0

parse_args() {
  local optstring=$1 help_lines=$2 usage=$3 opt
  shift 3
  OPTIND=1
  while getopts "$optstring" opt; do
    case $opt in
      b) build=$OPTARG ;;
      o) out=$OPTARG ;;
      e) epochs=$OPTARG ;;
      m) model=$OPTARG ;;
      j) jobs=$OPTARG ;;
      s) seeds=$OPTARG ;;
      x) extra=$OPTARG ;;
      n) dry_run=1 ;;
      h) sed -n "${help_lines}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "usage: $0 $usage" >&2; exit 2 ;;
    esac
  done
  args_parsed=$((OPTIND - 1))
  if [ "$dry_run" = 1 ]; then
    train=${build:-BUILD}/examples/train
    return 0
  fi
  train=$(find_train "$build" "$here") || exit 1
}
