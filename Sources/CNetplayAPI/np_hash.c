/* np_hash_bytes: the state hash peers compare, the libretro host's own (one implementation). */
#include "netplay.h"
#include "nlr_host.h"

uint64_t np_hash_bytes(const void *data, size_t size) {
    if (data == NULL) return nlr_hash64("", 0);
    return nlr_hash64(data, size);
}
