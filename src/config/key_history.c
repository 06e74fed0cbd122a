/* Keys of other MaxText releases: the rows of data/maxtext/key_history.tsv
 * (compiled in by cmake/embed_table.cmake) as smoe_old_key. The table's
 * kind column decides which of current/def a row has. */
#include "config_impl.h"

#include <string.h>

extern const char *const smoe_maxtext_key_history[][5];
extern const size_t smoe_maxtext_key_history_n;

int smoe_old_key_at(size_t i, smoe_old_key *out)
{
    if (i >= smoe_maxtext_key_history_n)
        return 0;
    const char *const *row = smoe_maxtext_key_history[i];
    int renamed = strcmp(row[1], "renamed") == 0;
    out->key = row[0];
    out->current = renamed ? row[2] : NULL;
    out->def = renamed ? NULL : row[3];
    out->history = row[4];
    return 1;
}

int smoe_old_key_find(const char *key, smoe_old_key *out)
{
    for (size_t i = 0; smoe_old_key_at(i, out); i++)
        if (strcmp(out->key, key) == 0)
            return 1;
    return 0;
}
