/* Control for the layer tests: a core file including a core header compiles. */
#include "model.h"

int ds_layer_check_control(void) { return DS_MAX_RNN; }
