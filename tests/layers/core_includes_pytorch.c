/* Must not compile: the core layer cannot see the pytorch layer's headers. */
#include "pt_file.h"

int ds_layer_check(void) { return 0; }
