/* Must not compile: the core layer cannot see the data layer's headers. */
#include "dataset.h"

int ds_layer_check(void) { return 0; }
