#include "common/options.h"

const struct cushim_option_info cushim_option_table[CUSHIM_OPT_COUNT] = {
#define CUSHIM_X_ROW(e, var, type, choices, def, help) \
    [CUSHIM_OPT_##e] = {var, CUSHIM_OT_##type, choices, def, help},
    CUSHIM_OPTIONS(CUSHIM_X_ROW)
#undef CUSHIM_X_ROW
};
