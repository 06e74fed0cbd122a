/* Error struct and status names. Library code reports failures by returning
 * a smoe_status and, when the caller passed one, filling a smoe_err with a
 * message and the place (file:line:col of config input, or the argument). */
#include "smoe/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static smoe_status fill(smoe_err *e, smoe_status code, const char *where,
                        const char *fmt, va_list ap)
{
    if (!e)
        return code;
    e->code = code;
    snprintf(e->where, sizeof e->where, "%s", where ? where : "");
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return code;
}

smoe_status smoe_err_set(smoe_err *e, smoe_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(e, code, NULL, fmt, ap);
    va_end(ap);
    return code;
}

smoe_status smoe_err_at(smoe_err *e, smoe_status code, smoe_loc loc,
                        const char *fmt, ...)
{
    char where[320];
    va_list ap;
    smoe_loc_format(loc, where, sizeof where);
    va_start(ap, fmt);
    fill(e, code, where, fmt, ap);
    va_end(ap);
    return code;
}

smoe_status smoe_err_in(smoe_err *e, smoe_status code, const char *where,
                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(e, code, where, fmt, ap);
    va_end(ap);
    return code;
}

const char *smoe_loc_format(smoe_loc loc, char *buf, size_t n)
{
    if (!loc.file)
        snprintf(buf, n, "%s", "");
    else if (loc.line <= 0)
        snprintf(buf, n, "%s", loc.file);
    else if (loc.col <= 0)
        snprintf(buf, n, "%s:%d", loc.file, loc.line);
    else
        snprintf(buf, n, "%s:%d:%d", loc.file, loc.line, loc.col);
    return buf;
}

const char *smoe_err_format(const smoe_err *e, char *buf, size_t n)
{
    if (!e)
        snprintf(buf, n, "%s", "unknown error");
    else if (e->where[0])
        snprintf(buf, n, "%s: %s", e->where, e->msg);
    else
        snprintf(buf, n, "%s", e->msg);
    return buf;
}

const char *smoe_status_name(smoe_status s)
{
    switch (s) {
    case SMOE_OK: return "ok";
    case SMOE_EINVAL: return "invalid input";
    case SMOE_ENOMEM: return "out of memory";
    case SMOE_EIO: return "i/o error";
    case SMOE_ENOTFOUND: return "not found";
    case SMOE_ECOMM: return "communication error";
    case SMOE_EINTERNAL: return "internal error";
    case SMOE_ENONFINITE: return "non-finite value";
    }
    return "unknown status";
}

const char *smoe_err_quote(const char *s, size_t max, char *buf, size_t n)
{
    size_t o = 0;
    if (n == 0)
        return buf;
    for (size_t i = 0; s[i] && i < max && o + 5 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f)
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, n - o, "\\x%02X", c);
    }
    buf[o] = 0;
    return buf;
}
