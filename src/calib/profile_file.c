/* Where smoe sim --calibrate writes its profile: smoe_out's temporary
 * beside the target (core's outfile.c), created before anything is
 * measured (a path that cannot be written is refused at once, not after
 * the measurement) and renamed over the target once the profile is whole
 * (a failed calibration leaves an older profile as it was). Rank 0 alone
 * holds the file; every rank gets its verdict. */
#include "calib_impl.h"

#include <string.h>

smoe_status calib_out_open(smoe_rt *rt, const char *path, calib_out *o, smoe_err *err)
{
    memset(o, 0, sizeof *o);
    smoe_status s = SMOE_OK;
    if (smoe_rt_rank(rt) == 0 && path) {
        s = smoe_out_open(path, "the profile", &o->out, err);
        o->f = s ? NULL : smoe_out_file(o->out);
    } else if (smoe_rt_rank(rt) == 0) {
        o->f = stdout;
    }
    return smoe_rt_agree_err(rt, s, err);
}

smoe_status calib_out_close(calib_out *o, smoe_status s, smoe_err *err)
{
    FILE *f = o->f;
    o->f = NULL;
    if (o->out)
        return smoe_out_finish(o->out, s, err);
    if (f && !s && (ferror(f) || fflush(f) != 0))
        return smoe_err_in(err, SMOE_EIO, "standard output", "cannot write the profile");
    return s;
}
