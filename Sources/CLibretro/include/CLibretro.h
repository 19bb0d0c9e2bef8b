/* Umbrella header of the CLibretro module: the libretro API subset and the host's C shims. */
#include "nlr_libretro_api.h"
#include "nlr_host.h"
