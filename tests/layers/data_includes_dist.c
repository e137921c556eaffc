/* Must not compile: the data layer cannot see the dist layer's headers. */
#include "world.h"

int ds_layer_check(void) { return 0; }
