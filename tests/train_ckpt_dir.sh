#!/bin/sh
# A checkpoint directory belongs to one run: a fresh run into a used
# directory is refused and nothing is deleted; pruning keeps the newest and
# never touches another run's checkpoints; LATEST naming a missing
# checkpoint is an error; a resume names the config keys that changed and
# refuses another data file; a second job on the directory is refused
# (flock); an unwritable directory is found before step 1; a diverged run
# (non-finite loss) stops and is never saved; an edited manifest is refused.
# usage: train_ckpt_dir.sh MPIEXEC SMOE CMP_RUNS
mpiexec=$1
smoe=$2
cmp=$3
lockpid=
mnt=
cleanup() {
  [ -n "$lockpid" ] && kill "$lockpid" 2>/dev/null
  [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
  rm -rf "$dir"
}
. "$(dirname "$0")/runs_lib.sh"
trap cleanup EXIT

# listing of a directory tree with sizes (to see that nothing changed)
tree() { (cd "$1" && find . -type f -exec ls -l {} + | awk '{print $5, $9}' | sort); }

# --- a fresh run into a directory that holds checkpoints: refused, untouched
must_run a 2 --steps 6 --checkpoint-dir "$dir/d" --checkpoint-every 1 --checkpoint-keep 2
tree "$dir/d" >"$dir/before"
refused "$dir/d: already holds checkpoints \(.*\): continue that run with --resume, or use an empty directory" \
  2 --steps 3 --checkpoint-dir "$dir/d" --checkpoint-every 1 --checkpoint-keep 2 learning_rate=1e-3
tree "$dir/d" >"$dir/after"
cmp -s "$dir/before" "$dir/after"
check $? "the refused fresh run changed nothing in the directory"

# --- resume with another learning rate: allowed, printed key by key
timeout 120 "$mpiexec" -n 2 "$smoe" train --steps 8 --checkpoint-dir "$dir/d" --resume \
  learning_rate=1e-3 >"$dir/out" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q "^config changed since the checkpoint: learning_rate: 3.e-3 -> 1e-3$" "$dir/out"
check $? "resume with learning_rate=1e-3 says 'learning_rate: 3.e-3 -> 1e-3' (exit $rc)"
kept=$(ls "$dir/d" | tr '\n' ' ')
[ "$(cat "$dir/d/LATEST")" = step_00000008 ] && [ "$kept" = "LATEST step_00000005 step_00000006 step_00000008 " ]
check $? "after the resumed run (no --checkpoint-keep) LATEST names step_00000008; kept: $kept"

# --- pruning: never another run's checkpoint, never the newest
must_run b 2 --steps 9 --checkpoint-dir "$dir/other"
must_run c 2 --steps 2 --checkpoint-dir "$dir/p" --checkpoint-every 1
cp -r "$dir/other/step_00000009" "$dir/p/" # a higher step of another run
must_run c2 2 --steps 5 --checkpoint-dir "$dir/p" --resume --checkpoint-every 1 --checkpoint-keep 1
kept=$(ls "$dir/p" | tr '\n' ' ')
[ "$kept" = "LATEST step_00000005 step_00000009 " ] && [ "$(cat "$dir/p/LATEST")" = step_00000005 ]
check $? "keep 1 kept this run's newest and the other run's step 9: $kept"

# --- LATEST naming a missing or garbled checkpoint: an error naming both
cp -r "$dir/p" "$dir/l1"
rm -rf "$dir/l1/step_00000009"
echo step_00000007 >"$dir/l1/LATEST"
refused "$dir/l1/LATEST: names step_00000007, but $dir/l1/step_00000007 is missing or incomplete \(no manifest.json\); the newest complete checkpoint is step_00000005" \
  2 --steps 9 --checkpoint-dir "$dir/l1" --resume
echo garbage >"$dir/l1/LATEST"
refused "$dir/l1/LATEST: does not name a checkpoint \(expected step_NNNNNNNN, found 'garbage'\)" \
  2 --steps 9 --checkpoint-dir "$dir/l1" --resume
rm "$dir/l1/LATEST"
timeout 120 "$mpiexec" -n 2 "$smoe" train --steps 6 --checkpoint-dir "$dir/l1" --resume \
  >"$dir/out" 2>&1
rc=$?
[ "$rc" -eq 0 ] &&
  grep -q "has no LATEST file: resuming from its newest complete checkpoint step_00000005" "$dir/out"
check $? "no LATEST: resumes from the newest complete checkpoint and says so (exit $rc)"

# --- another data file or model: refused
refused "argument '--data': the checkpoint .* was trained on another data file" 2 --steps 9 \
  --data "$0" --checkpoint-dir "$dir/p" --resume
refused ".*manifest.json: the checkpoint .* is of model_name tiny, this run's is deepseek3-tiny" \
  2 --steps 9 --model deepseek3-tiny --checkpoint-dir "$dir/p" --resume

# --- a second job on the same directory (flock held by another process)
# The holder's sleep gets no stdout: an inherited pipe would keep ctest
# waiting for its end. It writes its own pid once it holds the lock, and
# that pid (the sleep, after exec) is what is killed, so nothing outlives
# the case.
mkdir -p "$dir/locked"
: >"$dir/lockready"
flock "$dir/locked" sh -c "echo \$\$ >'$dir/lockready.tmp' && mv '$dir/lockready.tmp' '$dir/lockready'; exec sleep 120" \
  </dev/null >/dev/null 2>&1 &
flockpid=$!
i=0
while [ $i -lt 600 ] && [ ! -s "$dir/lockready" ]; do
  sleep 0.1
  i=$((i + 1))
done
lockpid=$(cat "$dir/lockready")
refused "$dir/locked: another job is using this checkpoint directory" 2 --steps 1 \
  --checkpoint-dir "$dir/locked"
[ -n "$lockpid" ] && kill "$lockpid" 2>/dev/null
wait "$flockpid" 2>/dev/null
lockpid=

# --- an unwritable directory: found before step 1 (a read-only mount)
mnt=$dir/ro
mkdir -p "$mnt"
if mount -t tmpfs -o ro,size=64k tmpfs "$mnt" 2>/dev/null; then
  timeout 120 "$mpiexec" -n 2 "$smoe" train --steps 3 --checkpoint-dir "$mnt" >"$dir/out" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && grep -q "^smoe: $mnt: cannot write into the checkpoint directory: Read-only file system" "$dir/out" &&
    ! grep -q "step  *1/" "$dir/out"
  check $? "a read-only checkpoint directory is refused before step 1 (exit $rc)"
  umount "$mnt"
else
  echo "skip: a read-only tmpfs cannot be mounted here (needs root): read-only directory case not run"
fi
mnt=
refused "argument '--checkpoint-dir': is empty: name a directory" 2 --steps 1 --checkpoint-dir ''

# --- a diverging run: stopped at the first non-finite loss, never saved
timeout 120 "$mpiexec" -n 2 "$smoe" train --steps 6 --quiet learning_rate=1e30 \
  --checkpoint-dir "$dir/nan" --checkpoint-every 1 >"$dir/out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -Eq "^smoe: step [0-9]+: the loss is (nan|inf) \(abort_on_(nan|inf)_loss: true\)" "$dir/out"
check $? "learning_rate=1e30 stops at the first non-finite loss (exit $rc: $(grep '^smoe:' "$dir/out" | head -1))"
bad=$(grep -Eo "step [0-9]+" "$dir/out" | head -1 | cut -d' ' -f2)
latest=$(cat "$dir/nan/LATEST" 2>/dev/null)
[ -n "$bad" ] && [ "$latest" = "$(printf 'step_%08d' $((bad - 1)))" ] &&
  [ ! -e "$dir/nan/$(printf 'step_%08d' "$bad")" ]
check $? "the diverged step $bad was not saved; LATEST is $latest"
timeout 120 "$mpiexec" -n 2 "$smoe" train --steps 6 --quiet learning_rate=1e30 \
  abort_on_nan_loss=false abort_on_inf_loss=false --checkpoint-dir "$dir/nan2" \
  --checkpoint-every 1 >"$dir/out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -q "the parameters or AdamW moments hold nan or inf; the checkpoint was not written" "$dir/out"
check $? "with the aborts off, non-finite parameters are still never saved (exit $rc)"

# --- a manifest edited consistently (fsdp and expert swapped in the mesh)
must_run m 4 --steps 2 ici_expert_parallelism=2 --checkpoint-dir "$dir/man"
mf=$dir/man/step_00000002/manifest.json
sed -i '/"axis_names"/ s/"fsdp"/"@@"/; /"axis_names"/ s/"expert"/"fsdp"/; /"axis_names"/ s/"@@"/"expert"/' "$mf"
grep '"axis_names"' "$mf" | grep -q '"expert",.*"fsdp"'
check $? "the test edited the manifest's mesh (expert before fsdp)"
refused ".*shard_0000[0-3].bin: the manifest's mesh, shapes or specs are not those this shard was written with" \
  4 --steps 4 ici_expert_parallelism=2 --checkpoint-dir "$dir/man" --resume

summary
