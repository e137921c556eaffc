/* Must not compile: the dist layer cannot see the app layer's headers. */
#include "train.h"

int ds_layer_check(void) { return 0; }
