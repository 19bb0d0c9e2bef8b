// libsodium (Debian: libsodium-dev): HMAC-SHA256, Argon2id password hashing, constant-time
// comparison and a CSPRNG for NetplayAuth. libzmq already links it, so it costs nothing extra.
#include <sodium.h>
