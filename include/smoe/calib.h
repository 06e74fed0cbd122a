/* smoe calib: this machine measured as a hardware profile for the
 * simulator (`smoe sim --calibrate`). It stands on the trainer's model
 * configuration and kernels (train) and on the cost model (sched), and on
 * the MPI runtime for the collectives it times; nothing below it includes
 * this header. */
#ifndef SMOE_CALIB_H
#define SMOE_CALIB_H

#include "smoe/config.h"
#include "smoe/plan.h"
#include "smoe/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Measure this machine's cpu-mpi hardware profile with every rank busy at
 * once (as in training): matmul rates (64- and 512-wide), memory bandwidth,
 * per-kernel overhead, all-gather and all-to-all latency and bandwidth
 * within a host and across hosts (ranks per host from their host names),
 * the spread of the ranks' arrival at a collective entered after a stretch
 * of compute (sync_skew), the wait a reduce-scatter's root causes
 * (reduce_lag_bandwidth), smoe train's optimizer update rate, and the
 * ratio of smoe's model kernels to the cost model's roofline for the
 * model of cfg at its training shape (compute_scale, as XLA's profile-
 * guided latency estimator measures op costs). progress_thread is
 * smoe_rt_opts's: 1, the collectives run with the runtime's progress
 * thread (smoe train --progress-thread), 0 progressed only inside MPI
 * calls, SMOE_RT_PROGRESS_AUTO as smoe train's default (on when the ranks
 * span more than one host); the profile records the mode that ran
 * (`progress: thread | calls`). Rank 0 writes the profile
 * (YAML, the keys of configs/hardware/ files) to `path`, or stdout when
 * NULL: to a temporary file beside path, created before anything is
 * measured and renamed over path at the end (SMOE_EIO naming path when it
 * cannot be written). Refused before measuring with SMOE_EINVAL: fewer
 * than 2 ranks, or the model's layers, timed whole on every rank, over
 * this machine's memory (smoe_train_check_ram). Collective (every rank
 * returns the same status); the mesh of rt must not be set yet. */
SMOE_MUST_CHECK
smoe_status smoe_calib_measure(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                               int progress_thread, const char *path, smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
