/* Must not compile: the core layer cannot see the dist layer's headers. */
#include "reduce.h"

int ds_layer_check(void) { return 0; }
