/* The fake NCCL's own call (fake_nccl.c): a launcher that runs a
 * collective in a stream's order. launch(stream, work, arg) must arrange
 * work(arg) to run when the stream reaches that point, on a thread of its
 * own per stream (every rank's collective blocks until its peers run
 * theirs); 0 when arranged. NULL (the default): collectives run at the
 * call. */
#ifndef SMOE_TEST_FAKE_NCCL_H
#define SMOE_TEST_FAKE_NCCL_H

typedef int (*fake_nccl_launch_fn)(void *stream, void (*work)(void *), void *arg);
void fake_nccl_set_launcher(fake_nccl_launch_fn fn);

#endif
