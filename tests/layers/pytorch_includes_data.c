/* Must not compile: the pytorch layer sees the core only, not the data layer. */
#include "dataset.h"

int ds_layer_check(void) { return 0; }
