# find_train.sh — sourced by common_args.sh: where the `train` executable is.
#   find_train BUILD_DIR SCRIPT_DIR   prints BUILD_DIR/examples/train, or without BUILD_DIR the
#                                     newest build/*/examples/train of the checkout; fails if none.
find_train() {
  if [ -n "$1" ]; then
    found=$1/examples/train
  else
    # shellcheck disable=SC2012  # ls -t: the newest build; the paths are plain
    found=$(ls -t "$2"/../build/*/examples/train 2>/dev/null | head -n 1 || true)
  fi
  if [ -z "$found" ] || [ ! -x "$found" ]; then
    echo "$0: no train executable found; build it (cmake --build BUILD_DIR --target train) and pass -b BUILD_DIR" >&2
    return 1
  fi
  echo "$found"
}
