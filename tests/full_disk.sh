#!/bin/sh
# Outputs are written whole or not at all, and what interrupted saves leave
# does not block the next run:
# - a parameter dump beside another job's temporary X.tmp leaves it as it
#   was (each writer has its own) and X a whole dump;
# - a cpu profile cut at a line boundary is refused in one line naming the
#   file (before: it loaded and predicted without its later keys);
# - on a full file system (a small tmpfs; needs root to mount: exit 77,
#   skipped, when it cannot be mounted) every output smoe writes, rewritten
#   over a good file, fails in one line naming it and the OS error, and the
#   good file stays byte-identical with no temporary beside it:
#   sim --schedule-out, --trace, --plot; train --trace, --plot,
#   --dump-params; sim --calibrate --out;
# - a save killed half-way leaves step_N.tmp/; on a file system it fills,
#   --resume removes it, says so in one line, and saves another step
#   (before: "No space left on device" naming the new step's shard).
# usage: full_disk.sh MPIEXEC SMOE DATA_DIR
mpiexec=$1
smoe=$2
data=$3
mnt=
cleanup() {
  [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
  rm -rf "$dir"
}
. "$(dirname "$0")/runs_lib.sh"
trap cleanup EXIT
# RC WHAT: counted; on a failure the command's stderr shown
seen() {
  [ "$1" -eq 0 ] || sed 's/^/    /' "$dir/err" | head -6 >&2
  check "$1" "$2"
}
sim="sim --base $SMOE_CONFIG_DIR/train.yml --model tiny --devices 2 --hardware tpu7x --batch 1"
# larger outputs, rewritten over the small ones (a file truncated first
# would not have room for them either)
big="sim --model deepseek2-16b --devices 16 ici_expert_parallelism=4 --hardware tpu7x --batch 1"
big="$big --seq 2048"
bigtrain="train --steps 3 --quiet base_num_decoder_layers=6 override_model_config=true"

# --- a dump beside another writer's temporary
printf 'SMOEPRM1\nanother job, half written' >"$dir/x.bin.tmp"
cp "$dir/x.bin.tmp" "$dir/other"
"$smoe" train --steps 1 --quiet --dump-params "$dir/x.bin" >/dev/null 2>"$dir/err" &&
  "$smoe" train --steps 1 --quiet --dump-params "$dir/ref.bin" >/dev/null 2>>"$dir/err"
rc=$?
[ "$rc" -eq 0 ] && cmp -s "$dir/x.bin.tmp" "$dir/other" && cmp -s "$dir/x.bin" "$dir/ref.bin"
seen $? "a dump beside another writer's temporary (exit $rc): that one untouched, the dump whole"

# --- a profile cut short
head -n 20 "$data/hardware/cpu-mpi.yml" >"$dir/cut.yml"
"$smoe" $sim --seq 128 --hardware "$dir/cut.yml" >/dev/null 2>"$dir/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
  grep -q "^smoe: $dir/cut.yml: incomplete profile" "$dir/err"
seen $? "a profile cut short refused (exit $rc): $(cut -c1-90 "$dir/err")"

mnt=$dir/small
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=8m tmpfs "$mnt" 2>/dev/null; then
  mnt=
  echo "skipped: no tmpfs can be mounted here (needs root)"
  summary && exit 77
  exit 1
fi

# --- good outputs, then the file system full, then each rewritten
"$smoe" $sim --seq 128 --schedule-out "$mnt/s.json" --trace "$mnt/t.json" \
  --plot "$mnt/p.svg" >/dev/null 2>"$dir/err"
seen $? "sim's good outputs"
"$smoe" train --steps 1 --quiet --trace "$mnt/tt.json" --plot "$mnt/tp.svg" \
  --dump-params "$mnt/d.bin" >/dev/null 2>"$dir/err"
seen $? "train's good outputs"
cp "$data/hardware/cpu-mpi.yml" "$mnt/hw.yml"
mkdir "$dir/orig"
cp "$mnt"/* "$dir/orig/"
head -c 9000000 /dev/zero >"$mnt/fill" 2>/dev/null
# OPT FILE CMD...: exit 1, one smoe line naming OPT, FILE byte-identical
rewrite_fails() {
  opt=$1
  f=$2
  shift 2
  "$@" >/dev/null 2>"$dir/err"
  rc=$?
  [ "$rc" -eq 1 ] && [ "$(grep -c "^smoe:" "$dir/err")" -eq 1 ] &&
    grep -q "^smoe: $opt.*No space left on device (the file is unchanged)$" "$dir/err" &&
    cmp -s "$mnt/$f" "$dir/orig/$f"
  seen $? "$f rewritten on a full disk (exit $rc): unchanged; $(grep '^smoe:' "$dir/err" |
    cut -c1-90)"
}
rewrite_fails "argument '--schedule-out $mnt/s.json'" s.json "$smoe" $big \
  --schedule-out "$mnt/s.json"
rewrite_fails "argument '--trace $mnt/t.json'" t.json "$smoe" $big --trace "$mnt/t.json"
rewrite_fails "argument '--plot $mnt/p.svg'" p.svg "$smoe" $big --plot "$mnt/p.svg"
rewrite_fails "$mnt/d.bin: cannot write the parameter dump" d.bin "$smoe" $bigtrain \
  --dump-params "$mnt/d.bin"
rewrite_fails "$mnt/tt.json: cannot write the trace" tt.json "$smoe" $bigtrain \
  --trace "$mnt/tt.json"
rewrite_fails "argument '--plot $mnt/tp.svg'" tp.svg "$smoe" $bigtrain --trace "$dir/tt.json" \
  --plot "$mnt/tp.svg"
rewrite_fails "$mnt/hw.yml: cannot write the profile" hw.yml timeout 300 "$mpiexec" -n 2 "$smoe" \
  sim --calibrate --out "$mnt/hw.yml"
left=$(ls "$mnt" | tr '\n' ' ')
[ "$left" = "d.bin fill hw.yml p.svg s.json t.json tp.svg tt.json " ]
check $? "no temporary left: $left"

# --- a save killed half-way, then --resume on the file system it fills
umount "$mnt"
mount -t tmpfs -o size=24m tmpfs "$mnt"
SMOE_TEST_KILL_IN_SAVE=2 "$smoe" train --steps 2 --quiet --checkpoint-every 1 \
  --checkpoint-dir "$mnt/ck" >/dev/null 2>&1
[ -d "$mnt/ck/step_00000002.tmp" ] && [ "$(cat "$mnt/ck/LATEST")" = step_00000001 ]
check $? "a killed save left step_00000002.tmp: $(ls "$mnt/ck" | tr '\n' ' ')"
# resumed to save step 3 (not 2 again): it needs the space step 2's left
"$smoe" train --steps 3 --quiet --checkpoint-every 3 --checkpoint-dir "$mnt/ck" --resume \
  >/dev/null 2>"$dir/err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c . "$dir/err")" -eq 1 ] &&
  grep -q "^note: removed stale temporary $mnt/ck/step_00000002.tmp from an interrupted save$" \
    "$dir/err" &&
  [ "$(cat "$mnt/ck/LATEST")" = step_00000003 ] && [ ! -e "$mnt/ck/step_00000002.tmp" ]
seen $? "resume on a full disk after a killed save (exit $rc): $(ls "$mnt/ck" | tr '\n' ' ')"
summary
