// The system SQLite (Debian: libsqlite3-dev), the coordinator's embedded durable store.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a destructor pointer, which Swift cannot import.
static inline sqlite3_destructor_type netplay_sqlite_transient(void) { return SQLITE_TRANSIENT; }
