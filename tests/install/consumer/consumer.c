/* Uses the installed C ABI. */
#include <stdio.h>

#include "ksearch/ksearch.h"

int main(void) {
  ks_search_options o;
  if (ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION) != KS_OK) return 1;
  printf("ksearch %s, default rounds %d, strategy %s\n", ks_version_string(), o.budget.max_rounds,
         ks_strategy_name(o.strategy));
  return 0;
}
