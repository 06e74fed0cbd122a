#!/bin/sh
# The README's "Try it" block runs as written: the fenced block right under
# the "## Try it" heading, copied out of README.md, each line a command,
# run from a scratch directory that looks like the repository root
# (`build` and `scripts` are links to the real ones, so the output files the
# commands name land in the scratch directory, never in the source tree),
# with no environment beyond PATH and HOME, as a reader would type it (a
# sanitizer build's ASAN_OPTIONS/UBSAN_OPTIONS pass through).
# Every command must exit 0, and every FILE.svg/FILE.json it names must
# exist afterwards. First the extraction runs on a planted README whose
# block has a failing command, which must be caught (so the test can fail).
# usage: tests/readme_tryit.sh SOURCE_DIR BUILD_DIR [MPIEXEC]
#   MPIEXEC: the build's MPI launcher; when it is not the `mpirun` on PATH
#   (an MPICH build beside Open MPI), scripts/mpirun.sh is told to use it.
set -u
src=${1:?usage: readme_tryit.sh SOURCE_DIR BUILD_DIR [MPIEXEC]}
build=${2:?usage: readme_tryit.sh SOURCE_DIR BUILD_DIR [MPIEXEC]}
mpiexec=${3:-}
src=$(cd "$src" && pwd)
build=$(cd "$build" && pwd)
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# The commands of the Try-it block of README FILE, one a line (blank lines
# and comment lines dropped); nothing when there is no such block.
tryit_block() { # FILE
  awk '/^## Try it[ ]*$/ { inside = 1; next }
       inside && /^## / { exit }
       inside && /^```/ { if (fence) exit; fence = 1; next }
       fence && !/^[ ]*(#|$)/ { print }' "$1"
}

# Run the commands in FILE from directory DIR (each with its stdin closed,
# so none eats the list); prints each failure; returns the number that
# failed and counts the commands run in $ran.
run_block() { # FILE DIR
  nf=0
  while IFS= read -r cmd; do
    ran=$((ran + 1))
    echo "\$ $cmd"
    (cd "$2" && env -i PATH="$PATH" HOME="$2" ${launcher:+MPIRUN="$launcher"} \
       ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
       sh -c "$cmd") </dev/null >"$2/.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
      echo "  exit $rc:"
      tail -n 20 "$2/.out" | sed 's/^/    /'
      nf=$((nf + 1))
      continue
    fi
    for f in $(printf '%s\n' "$cmd" | tr ' ' '\n' | grep -E '^[A-Za-z0-9_.-]+\.(svg|json)$'); do
      if [ ! -s "$2/$f" ]; then
        echo "  wrote no $f"
        nf=$((nf + 1))
      fi
    done
  done <"$1"
  return "$nf"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/root"
ln -s "$build" "$tmp/root/build"
ln -s "$src/scripts" "$tmp/root/scripts"
launcher=
if [ -n "$mpiexec" ] && command -v mpirun >/dev/null 2>&1 &&
   [ "$(readlink -f "$(command -v mpirun)")" != "$(readlink -f "$mpiexec")" ]; then
  launcher=$mpiexec
fi

# The planted README: one good command, one that fails, one that claims a
# file it does not write.
cat >"$tmp/planted.md" <<'EOF'
# Planted

## Try it

```sh
build/smoe --version
build/smoe plan --devices 0
build/smoe --version >/dev/null  # names out.svg
```

## After
EOF
tryit_block "$tmp/planted.md" >"$tmp/planted.cmds"
ran=0
run_block "$tmp/planted.cmds" "$tmp/root" >"$tmp/planted.out" 2>&1
got=$?
if [ "$(wc -l <"$tmp/planted.cmds")" -eq 3 ] && [ "$got" -eq 2 ]; then
  ok
else
  bad "the planted block: $got failures caught, expected 2:"
  cat "$tmp/planted.out"
fi

# The README's own block (the source tree's state kept, to see that it
# stays as it was).
(cd "$src" && git status --porcelain --untracked-files=all 2>/dev/null) >"$tmp/before"
tryit_block "$src/README.md" >"$tmp/cmds"
n=$(wc -l <"$tmp/cmds")
if [ "$n" -lt 3 ]; then
  bad "README.md: no Try-it block under '## Try it' (found $n commands)"
else
  ok
  ran=0
  run_block "$tmp/cmds" "$tmp/root"
  got=$?
  if [ "$got" -eq 0 ]; then ok; else bad "$got of the $n Try-it commands failed"; fi
  if [ "$ran" -eq "$n" ]; then ok; else bad "ran $ran of the $n Try-it commands"; fi
fi
(cd "$src" && git status --porcelain --untracked-files=all 2>/dev/null) >"$tmp/after"
if ! cmp -s "$tmp/before" "$tmp/after"; then
  bad "the Try-it block changed the source tree:"
  diff "$tmp/before" "$tmp/after"
else
  ok
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
