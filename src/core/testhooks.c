/* The test hooks (core.h): set by test programs only, zero otherwise. */
#include "smoe/core.h"

#include <string.h>

static smoe_test_hooks g_hooks;

void smoe_set_test_hooks(const smoe_test_hooks *h)
{
    if (h)
        g_hooks = *h;
    else
        memset(&g_hooks, 0, sizeof g_hooks);
}

smoe_test_hooks smoe_get_test_hooks(void)
{
    return g_hooks;
}
