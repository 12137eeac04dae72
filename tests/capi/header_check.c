/* ksearch.h must compile as plain C99 with no other include before it. */
#include "ksearch/ksearch.h"

int ks_header_check(void);
int ks_header_check(void) { return KS_SEARCH_OPTIONS_VERSION + (int)KS_OK; }
