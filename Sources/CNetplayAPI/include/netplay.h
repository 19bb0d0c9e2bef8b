/*
 * netplay.h: the Netplay toolkit's C API (library libNetplayC), for frontends written in C or C++.
 *
 * A small, stable surface over NetplayKit: a client (np_client) browses rooms and hosts, joins or
 * spectates one; the result is a match (np_match) the frontend ticks once per displayed frame.
 * The rollback engine runs inside the library and drives the frontend's emulator through the
 * callbacks of np_game_callbacks (save, load, advance, checksum). See docs/capi.md.
 *
 * Conventions:
 * - Every function that can fail returns an np_result: NP_OK (0) or an NP_ERR_* code; the reason
 *   is then in np_last_error() (and np_last_error_code() for a refusal by a service).
 * - Bad arguments (NULL, a freed handle, a wrong size) return an error and change nothing; the
 *   library never aborts on them.
 * - Out-parameters are written only on NP_OK.
 * - Strings are UTF-8, NUL-terminated. Strings the library returns in structs are copies,
 *   truncated to the field's size; pointers the caller passes in are only read during the call.
 * - Structs the caller passes in that carry a struct_size are filled with their _init macro
 *   first (defaults), so that later versions can append fields without breaking callers: the
 *   library writes and reads only as much as the caller's version has, and refuses a
 *   struct_size that no version had (a struct never filled by its _init).
 */
#ifndef NETPLAY_H
#define NETPLAY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API version this header describes: major << 16 | minor. Minor versions only add. */
#define NP_API_VERSION 0x00010001u

/* ---- Results and errors ---------------------------------------------------------------- */

typedef int np_result;
#define NP_OK 0
#define NP_ERR_INVALID_ARGUMENT 1 /* NULL or out-of-range argument, wrong struct_size or size */
#define NP_ERR_INVALID_HANDLE 2   /* NULL, freed or foreign np_client / np_match */
#define NP_ERR_BUFFER_TOO_SMALL 3 /* the caller's buffer is too small (the needed size is reported) */
#define NP_ERR_NOT_FOUND 4        /* nothing there (yet): no such room or session (np_last_error_code() 40), no checksum for that frame */
#define NP_ERR_UNAVAILABLE 5      /* a service or host could not be reached */
#define NP_ERR_REFUSED 6          /* a service refused: see np_last_error_code() (CONTENT_MISMATCH...) */
#define NP_ERR_GAME 7             /* a game callback failed (save, load): the match was left */
#define NP_ERR_ENDED 8            /* the match is over (left, kicked, session ended, relay lost) */
#define NP_ERR_INTERNAL 9         /* anything else */

/* The reason for the last error on the calling thread ("" when none); valid until the next call
 * on this thread. */
const char *np_last_error(void);
/* The wire error code (docs/protocol: ErrorCode, e.g. 21 WRONG_PASSWORD, 60 CONTENT_MISMATCH) of
 * the last NP_ERR_REFUSED (or NP_ERR_NOT_FOUND from a service: 40) on the calling thread, 0 otherwise. */
int np_last_error_code(void);

/* NP_API_VERSION of the library loaded (compare its major with this header's). */
uint32_t np_api_version(void);
/* The toolkit's version, e.g. "0.1.0" (static storage). */
const char *np_version_string(void);

/* ---- Helpers a frontend needs to agree with other peers ---------------------------------- */

/* The 64-bit hash peers compare as a state's checksum: the libretro host's and netplay-peer's
 * (a core's checksum is np_hash_bytes of its retro_serialize output). data may be NULL when
 * size is 0. */
uint64_t np_hash_bytes(const void *data, size_t size);
/* CRC-32 (zlib's) and MD5 of content, as the coordinator compares them. md5_out: 16 bytes.
 * Either output may be NULL. */
np_result np_content_digest(const void *data, size_t size, uint32_t *crc32_out, uint8_t *md5_out);
/* The core id a libretro core announces: "libretro." + its library_name in lower case, letters,
 * digits, '-' and '_' only. Writes at most capacity bytes with the NUL. */
np_result np_libretro_core_id(const char *library_name, char *out, size_t capacity);

/* ---- The game: callbacks into the frontend --------------------------------------------- */

/* Input statuses passed to advance, one byte per player. Only NP_INPUT_DISCONNECTED is the same
 * on every peer: only it may change what the game does (the others are for HUDs). */
#define NP_INPUT_CONFIRMED 0
#define NP_INPUT_PREDICTED 1
#define NP_INPUT_SUBSTITUTED 2
#define NP_INPUT_DISCONNECTED 3

/*
 * The frontend's game. Every callback runs on the thread that calls np_match_tick (or the call
 * creating the match), never concurrently, and gets `user` back. The callbacks must be
 * deterministic: the same state and inputs give the same next state on every peer.
 * Calls on one np_match must not overlap (one thread at a time; a call while another thread is
 * inside one on the same match returns NP_ERR_INVALID_ARGUMENT). A callback may call its match
 * (status, HUD, chat, leave, free) but not np_match_tick (NP_ERR_INVALID_ARGUMENT); after
 * np_match_free from a callback, no callback runs again.
 */
typedef struct np_game_callbacks {
    void *user;
    /* Bytes a saved state takes. Must be > 0, and the same on every peer for the same frame:
     * for a libretro core, retro_serialize_size once at load (nestopia's answer shrinks after
     * the first frame), unless the core declares variable sizes. */
    size_t (*state_size)(void *user);
    /* Writes the current state into buffer (size bytes, state_size's answer, zero-filled: a
     * core that writes less, as nestopia does, leaves zeros). 0 on success. */
    int (*save)(void *user, uint8_t *buffer, size_t size);
    /* Restores a state made by save, here or on another peer. 0 on success; non-zero (a state
     * of the wrong size, say) makes the match leave with NP_ERR_GAME. */
    int (*load)(void *user, const uint8_t *data, size_t size);
    /* Simulates one frame. inputs: player_count inputs of input_size bytes each, player 1 first;
     * statuses: player_count NP_INPUT_* bytes. resimulating is non-zero while the engine
     * re-runs frames after a rollback (mute audio, skip video). Both arrays are valid only
     * during the call. */
    void (*advance)(void *user, const uint8_t *inputs, size_t input_size, int player_count,
                    const uint8_t *statuses, int resimulating);
    /* The state's checksum, compared between peers. NULL: np_hash_bytes of a save (what
     * netplay-peer and the libretro host use for cores: retro_serialize into a zeroed buffer
     * of retro_serialize_size bytes). */
    uint64_t (*checksum)(void *user);
} np_game_callbacks;

/* What identifies the game's content; the coordinator refuses joiners whose crc32, md5 or
 * core_id differ from the host's, or whose core_version does. Strings may be NULL (empty);
 * core_id and core_version are trimmed of surrounding spaces, as the libretro host trims a
 * core's library_version (nestopia reports "1.52.0 "). */
typedef struct np_content {
    const char *game_name;    /* the content's file name without extension */
    uint32_t crc32;
    uint8_t md5[16];
    const char *core_id;      /* np_libretro_core_id() for a libretro core */
    const char *core_version;
    const char *system;       /* the content's extension, lower case ("nes") */
    uint64_t size;
} np_content;

/* ---- The client ------------------------------------------------------------------------ */

typedef struct np_client np_client;

typedef struct np_client_config {
    uint32_t struct_size;         /* set by np_client_config_init */
    const char *name;             /* the player's display name (required) */
    const char *discovery;        /* e.g. "tcp://127.0.0.1:7100"; NULL: the default; "": none (LAN only) */
    const char *coordinator;      /* NULL: the default; "": none */
    uint16_t lan_port;            /* LAN beacon port (default 7102) */
    double timeout_seconds;       /* per try; a request gets 3 (default 2) */
    const uint8_t *server_key;    /* the cluster's CurveZMQ public key, 32 bytes, or NULL (plain) */
    int measure_relays;           /* measure the round trip to relays before hosting/joining (default 1) */
} np_client_config;

/* Fills config with the defaults (name NULL). A macro over np_client_config_init_sized, so the
 * library writes only the fields this header's version of the struct has (sizeof). */
void np_client_config_init_sized(np_client_config *config, size_t size);
#define np_client_config_init(config) np_client_config_init_sized((config), sizeof *(config))
/* Creates a client. Thread-safe: a client may be used from any thread. Free with np_client_free. */
np_result np_client_create(const np_client_config *config, np_client **out);
/* Frees a client (its matches stay valid). NULL or an already freed client does nothing. */
void np_client_free(np_client *client);

/* ---- Rooms ------------------------------------------------------------------------------ */

/* A room browser row (a copy; plain data). */
typedef struct np_room {
    char id[64];
    char session_id[64];
    char room_name[128];
    char host_name[72];
    char game_name[128];
    char core_id[64];
    char core_version[64];
    uint32_t crc32;
    int max_players;
    int players;
    int spectators_allowed;
    int spectators;
    int has_password;
    int in_progress;
    int frame_delay;
    int is_lan;
    char endpoint[128];       /* the LAN host's relay, or the lobby room's relay */
    int ping_ms;              /* -1: not measured */
} np_room;

/* Lobby and LAN rooms (LAN listened to for lan_ms milliseconds; 0: lobby only), each with its
 * ping. Writes at most capacity rooms; *count is the number found (more than capacity:
 * NP_ERR_BUFFER_TOO_SMALL, the first capacity written). rooms may be NULL when capacity is 0.
 * Blocks up to about lan_ms, plus 3 timeouts for each page of 100 lobby rooms (at most 5 pages;
 * each page's request is tried 3 times), plus 1 s to ping the rooms' relays. */
np_result np_client_browse(np_client *client, int lan_ms, np_room *rooms, size_t capacity, size_t *count);

/* ---- Hosting, joining, spectating ------------------------------------------------------- */

typedef struct np_host_settings {
    uint32_t struct_size;         /* set by np_host_settings_init */
    const char *room_name;        /* required */
    int max_players;              /* 1 ... 8 (default 2) */
    int frame_delay;              /* -1: automatic (default), or 0 ... 15 frames */
    int max_spectators;           /* 0: no spectators (default 11) */
    const char *password;         /* NULL: none */
    const char *spectate_password;
    int lan;                      /* 1: a LAN room (in-process relay, beacon); 0: through the cluster */
    const char *region;
    int prediction_window;        /* rollback window in frames (default 8) */
    int lag_tolerance;            /* frames a player may lag before substitution (default 12) */
    int spectator_delay;          /* frames (default 0) */
    int checksum_interval;        /* frames between checksums (default 60) */
    int frame_rate_millihertz;    /* the game's frame rate x 1000 (default 60000) */
    int unlisted;                 /* 1: not in the lobby's list (joined by session id) */
    const uint8_t *game_options;  /* opaque bytes stored in the replay header (may be NULL) */
    size_t game_options_size;
} np_host_settings;

/* Fills settings with the defaults (room_name NULL); a macro, as np_client_config_init. */
void np_host_settings_init_sized(np_host_settings *settings, size_t size);
#define np_host_settings_init(settings) np_host_settings_init_sized((settings), sizeof *(settings))

typedef struct np_match np_match;

/* Hosts a room (slot 1) for a game whose inputs are input_size bytes (1 ... 64). The match
 * connects on its first np_match_tick. Blocks for the coordinator's answer. After
 * NP_ERR_UNAVAILABLE the room may exist (only the answer was lost): the same call again, with the
 * same arguments, gets that room rather than a second one; a join likewise gets its seat. */
np_result np_client_host(np_client *client, const np_host_settings *settings, const np_content *content,
                         size_t input_size, const np_game_callbacks *game, np_match **out);
/* Joins room as a player (preferred_slot 0: any free slot). */
np_result np_client_join(np_client *client, const np_room *room, const np_content *content, const char *password,
                         int preferred_slot, const np_game_callbacks *game, np_match **out);
/* Watches room as a spectator (a running match is joined from a state). */
np_result np_client_spectate(np_client *client, const np_room *room, const char *password,
                             const np_game_callbacks *game, np_match **out);

/* ---- The match: the game loop ----------------------------------------------------------- */

/* What one tick did. */
typedef struct np_tick_result {
    int frames_advanced;          /* new frames simulated (0 while waiting, more while catching up) */
    int rolled_back_frames;       /* frames re-simulated by rollbacks */
    int running;                  /* the match runs */
    double frame_interval_scale;  /* wait this many nominal frame intervals before the next tick */
    int first_frame_near;         /* the first frame is near (the lobby is full, the host asked to
                                     start, or the start came): tick again in about a millisecond,
                                     since the start names the moment every player begins and a
                                     tick once a frame notices it up to a frame late; then pace
                                     frames from the tick that ran the first one */
} np_tick_result;

/* Runs one displayed frame: receives, (re)connects, simulates with input (input_size bytes, the
 * session's input size) as the local player's input, sends. Call it at the game's frame rate
 * from one thread. out may be NULL. NP_ERR_ENDED once the match is over (np_match_get_status
 * says why), NP_ERR_GAME when a callback failed. */
np_result np_match_tick(np_match *match, const uint8_t *input, size_t input_size, np_tick_result *out);

#define NP_STATE_IDLE 0
#define NP_STATE_HOSTING 1        /* attached, waiting for players */
#define NP_STATE_CONNECTING 2     /* attaching, waiting for a state, reconnecting (attempt > 0) */
#define NP_STATE_CONNECTED 3      /* playing or spectating */
#define NP_STATE_DISCONNECTED 4   /* over: see reason */

#define NP_REASON_NONE 0
#define NP_REASON_LEFT 1
#define NP_REASON_KICKED 2
#define NP_REASON_SESSION_ENDED 3
#define NP_REASON_RELAY_LOST 4
#define NP_REASON_REFUSED 5
#define NP_REASON_REPLACED 6
#define NP_REASON_FAILED 7

/* The match as a frontend shows it. */
typedef struct np_match_status {
    int state;                    /* NP_STATE_* */
    int reason;                   /* NP_REASON_* when disconnected */
    int refusal_code;             /* the wire error code with NP_REASON_REFUSED */
    int attempt;                  /* reconnect attempt while connecting */
    int slot;                     /* 1-based; 0 for a spectator */
    int players;                  /* players in the room (hosting, connected) */
    int max_players;
    int is_host;
    int is_spectator;
    int running;
    int64_t current_frame;        /* the next frame to simulate, in match numbering */
    int64_t confirmed_frames;     /* frames 0 ..< confirmed_frames are final here */
    int64_t start_frame;          /* the frame this peer started at (late joiners: their state's) */
    size_t input_size;
    double frame_rate_hz;
    char session_id[64];
    char description[256];        /* e.g. "connected as P2 (2 players)", "disconnected: kicked: ..." */
} np_match_status;

np_result np_match_get_status(np_match *match, np_match_status *out);

/* One participant on the HUD. */
typedef struct np_player_hud {
    int slot;                     /* 0 for spectators */
    char name[72];
    int connected;
    int ping_ms;
    int substituted_frames;
    int is_local;
} np_player_hud;

#define NP_HUD_MAX_PLAYERS 16

/* The HUD figures. */
typedef struct np_hud {
    int ping_ms;
    int jitter_ms;
    int frame_delay;
    int rollbacks;
    int rollback_frames;
    int max_rollback_frames;
    int frames_ahead;
    int64_t current_frame;
    int64_t confirmed_frame;
    int desyncs;
    int resyncs;
    int player_count;             /* rows in players (at most NP_HUD_MAX_PLAYERS) */
    np_player_hud players[NP_HUD_MAX_PLAYERS];
} np_hud;

np_result np_match_get_hud(np_match *match, np_hud *out);

/* The checksum this peer's engine reported to the relay for frame (confirmed inputs, the value
 * every peer compares). NP_ERR_NOT_FOUND when none (yet): only checksum frames are reported. */
np_result np_match_reported_checksum(np_match *match, int64_t frame, uint64_t *out);

/* Host: starts the match now with whoever is there, without waiting for every slot to fill;
 * called before the relay answered the attach, the start goes out once it has. */
np_result np_match_start_now(np_match *match);
/* Sends a chat line to everyone (at most 512 bytes of UTF-8 are sent, cut between characters).
 * NP_ERR_UNAVAILABLE while the match is not connected to the relay (connecting, reconnecting):
 * the line was not sent. NP_ERR_ENDED once the match is over. */
np_result np_match_send_chat(np_match *match, const char *text);

/* A chat line the match received (its own lines come back too: the relay sends each to all). */
typedef struct np_chat_line {
    int slot;                     /* the sender's slot; 0 for a spectator */
    char from[72];                /* the sender's name */
    char text[516];               /* at most 512 bytes of UTF-8, NUL-terminated */
    int64_t sent_at_unix_ms;      /* when the relay passed it on */
} np_chat_line;

/* The oldest chat line not read yet: NP_OK with *out filled, NP_ERR_NOT_FOUND when every line
 * was read. Lines arrive during np_match_tick; the match keeps the newest 200, so a frontend that
 * falls further behind skips the oldest. */
np_result np_match_next_chat(np_match *match, np_chat_line *out);

/* Leaves for good: detaches from the relay and tells the coordinator (the host leaving ends the
 * session), then waits at most wait_seconds (0: not at all) for the coordinator to take it.
 * Leaving twice does nothing more. */
np_result np_match_leave(np_match *match, double wait_seconds);
/* Frees a match, leaving it first (without waiting) if it was not left. Stops a LAN room's
 * in-process relay. NULL or an already freed match does nothing. */
void np_match_free(np_match *match);

#ifdef __cplusplus
}
#endif

#endif /* NETPLAY_H */
