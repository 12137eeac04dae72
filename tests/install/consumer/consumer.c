/* Uses the installed C ABI. */
#include <stdio.h>

#include "ksearch/ksearch.h"

int main(void) {
  ks_search_params p;
  if (ks_search_params_init(&p, KS_SEARCH_PARAMS_VERSION) != KS_OK) return 1;
  printf("ksearch %s, default rounds %d\n", ks_version_string(), p.max_rounds);
  return 0;
}
