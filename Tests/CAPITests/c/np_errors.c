/*
 * The C API's error paths, from C: NULL, freed and wrong-kind handles, wrong sizes, missing
 * callbacks, bad settings, unreachable services; and the helpers' values. Built and run by
 * Tests/CAPITests. Prints "ok <check>" per check, "FAILED <check>: ..." and exits 1 on the
 * first that does not hold, "ERRORS OK" at the end.
 *
 *   np_errors UNREACHABLE_ENDPOINT LAN_BEACON_PORT
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "netplay.h"

static int checks;

/* The first release's exported _init functions (macros in this header; the parentheses keep the
 * macros out), still there for frontends built against that release. */
extern void (np_client_config_init)(np_client_config *config);
extern void (np_host_settings_init)(np_host_settings *settings);

static void expect(int condition, const char *check) {
    if (!condition) {
        printf("FAILED %s: last error '%s'\n", check, np_last_error());
        exit(1);
    }
    checks++;
    printf("ok %s\n", check);
}

/* The call returned `code` and left a reason. */
static void expect_error(np_result result, np_result code, const char *check) {
    if (result != code) {
        printf("FAILED %s: returned %d, expected %d (last error '%s')\n", check, result, code, np_last_error());
        exit(1);
    }
    expect(strlen(np_last_error()) > 0, check);
}

static size_t state_size(void *user) { (void)user; return 4; }
static int save(void *user, uint8_t *buffer, size_t size) { (void)user; memset(buffer, 7, size); return 0; }
static int load(void *user, const uint8_t *data, size_t size) { (void)user, (void)data; return size == 4 ? 0 : 1; }
static int failing_save(void *user, uint8_t *buffer, size_t size) { (void)user, (void)buffer, (void)size; return 5; }
static void advance(void *user, const uint8_t *inputs, size_t input_size, int players, const uint8_t *statuses, int resim) {
    (void)user, (void)inputs, (void)input_size, (void)players, (void)statuses, (void)resim;
}

/* A frontend that calls back into the match from its advance callback: a tick (refused), or a
 * free (after which no callback may run). */
static np_match *reentered;
static int reentrant_mode;          /* 1: tick from advance, 2: free from advance */
static np_result reentrant_tick = NP_OK;
static int advances_after_free;
static int freed_in_callback;
static void reentrant_advance(void *user, const uint8_t *inputs, size_t input_size, int players, const uint8_t *statuses,
                              int resim) {
    (void)user, (void)inputs, (void)input_size, (void)players, (void)statuses, (void)resim;
    if (freed_in_callback) { advances_after_free++; return; }
    if (reentrant_mode == 1 && reentrant_tick == NP_OK) {
        uint8_t input[2] = {0};
        reentrant_tick = np_match_tick(reentered, input, 2, NULL);
    } else if (reentrant_mode == 2) {
        freed_in_callback = 1;
        np_match_free(reentered);
    }
}
/* A second thread calling into a match while the ticking thread is inside a call on it (here:
 * inside the advance callback of a tick): refused with a reason, and the match goes on. */
static np_match *contended;
static atomic_int tick_inside, other_done;
static np_result other_result = NP_OK;
static char other_error[256];
static void pause_ms(long ms) {
    struct timespec pause = {0, ms * 1000000L};
    nanosleep(&pause, NULL);
}
static void *other_thread(void *arg) {
    (void)arg;
    while (!atomic_load(&tick_inside)) pause_ms(1);
    np_match_status status;
    other_result = np_match_get_status(contended, &status);
    snprintf(other_error, sizeof other_error, "%s", np_last_error());
    atomic_store(&other_done, 1);
    return NULL;
}
static void holding_advance(void *user, const uint8_t *inputs, size_t input_size, int players, const uint8_t *statuses,
                            int resim) {
    (void)user, (void)inputs, (void)input_size, (void)players, (void)statuses, (void)resim;
    if (atomic_load(&other_done)) return;
    atomic_store(&tick_inside, 1);
    for (int waited = 0; !atomic_load(&other_done) && waited < 5000; waited++) pause_ms(1);
}

static int save_after_free(void *user, uint8_t *buffer, size_t size) {
    if (freed_in_callback) advances_after_free++;
    return save(user, buffer, size);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s UNREACHABLE_ENDPOINT LAN_BEACON_PORT\n", argv[0]);
        return 2;
    }
    const char *nowhere = argv[1];
    expect(np_api_version() >> 16 == 1, "api major version 1");
    expect(strlen(np_version_string()) > 0, "version string");

    /* Helpers: the same values as the Swift side and zlib / RFC 1321. */
    uint32_t crc = 0;
    uint8_t md5[16];
    expect(np_content_digest("abc", 3, &crc, md5) == NP_OK && crc == 0x352441C2u, "crc32 of abc");
    static const uint8_t abc_md5[16] = {0x90, 0x01, 0x50, 0x98, 0x3c, 0xd2, 0x4f, 0xb0,
                                        0xd6, 0x96, 0x3f, 0x7d, 0x28, 0xe1, 0x7f, 0x72};
    expect(memcmp(md5, abc_md5, 16) == 0, "md5 of abc");
    expect_error(np_content_digest(NULL, 5, &crc, md5), NP_ERR_INVALID_ARGUMENT, "digest of NULL with a size");
    expect_error(np_content_digest("abc", SIZE_MAX, &crc, md5), NP_ERR_INVALID_ARGUMENT, "digest of a size past any content");
    char id[64];
    expect(np_libretro_core_id("Nestopia", id, sizeof id) == NP_OK && strcmp(id, "libretro.nestopia") == 0, "core id");
    expect_error(np_libretro_core_id("Nestopia", id, 4), NP_ERR_BUFFER_TOO_SMALL, "core id into 4 bytes");
    expect_error(np_libretro_core_id(NULL, id, sizeof id), NP_ERR_INVALID_ARGUMENT, "core id of NULL");
    expect(np_hash_bytes(NULL, 0) == np_hash_bytes("", 0), "hash of nothing");
    expect(np_hash_bytes("abcd", 4) != np_hash_bytes("abce", 4), "hash differs");

    /* Clients. */
    np_client *client = NULL;
    np_client_config config;
    memset(&config, 0, sizeof config);
    config.name = "c";
    expect_error(np_client_create(&config, &client), NP_ERR_INVALID_ARGUMENT, "config without struct_size");
    expect_error(np_client_create(NULL, &client), NP_ERR_INVALID_ARGUMENT, "NULL config");
    /* A struct never filled by its _init holds a garbage struct_size: refused, whatever it is
     * (a size at least the library's was taken, and the garbage pointers after it read). */
    np_client_config_init(&config);
    config.name = "c";  /* valid in every other way */
    config.struct_size = 0xDEADBEEF;
    expect_error(np_client_create(&config, &client), NP_ERR_INVALID_ARGUMENT, "config with a garbage struct_size");
    config.struct_size = (uint32_t)sizeof config + 8;
    expect_error(np_client_create(&config, &client), NP_ERR_INVALID_ARGUMENT, "config with a struct_size no version had");
    /* The first release's sizes, frozen: the library takes them from any later one. */
    _Static_assert(sizeof(np_client_config) == 64, "np_client_config's first version is 64 bytes");
    _Static_assert(sizeof(np_host_settings) == 104, "np_host_settings' first version is 104 bytes");
    /* _init writes only what the caller's version of the struct has: a newer header's larger
     * struct keeps its tail, and a size below the first version's gets nothing. */
    struct { np_client_config config; unsigned char tail[32]; } newer;
    memset(&newer, 0xAB, sizeof newer);
    np_client_config_init_sized(&newer.config, sizeof newer);
    expect(newer.config.struct_size == sizeof(np_client_config) && newer.config.timeout_seconds == 2, "init of a newer, larger struct");
    int tail_intact = 1;
    for (size_t i = 0; i < sizeof newer.tail; i++) tail_intact &= newer.tail[i] == 0xAB;
    expect(tail_intact, "init leaves a newer struct's own fields alone");
    np_client_config legacy;
    memset(&legacy, 0, sizeof legacy);
    (np_client_config_init)(&legacy);
    np_host_settings legacy_settings;
    memset(&legacy_settings, 0, sizeof legacy_settings);
    (np_host_settings_init)(&legacy_settings);
    expect(legacy.struct_size == 64 && legacy.lan_port == 7102 && legacy_settings.struct_size == 104 && legacy_settings.frame_delay == -1,
           "the first release's _init functions");
    np_client_config tiny;
    memset(&tiny, 0xCD, sizeof tiny);
    np_client_config_init_sized(&tiny, 8);
    expect(tiny.struct_size == 0xCDCDCDCD, "init of a size no version had writes nothing");
    np_client_config_init(&config);
    expect_error(np_client_create(&config, &client), NP_ERR_INVALID_ARGUMENT, "config without a name");
    config.name = "c";
    config.timeout_seconds = -1;
    expect_error(np_client_create(&config, &client), NP_ERR_INVALID_ARGUMENT, "negative timeout");
    expect(client == NULL, "out untouched on errors");
    config.timeout_seconds = 0.3;
    config.discovery = nowhere;
    config.coordinator = nowhere;
    config.measure_relays = 0;
    expect(np_client_create(&config, &client) == NP_OK && client != NULL, "client created");

    size_t count = 99;
    np_room rooms[4];
    expect_error(np_client_browse(NULL, 0, rooms, 4, &count), NP_ERR_INVALID_HANDLE, "browse with a NULL client");
    expect_error(np_client_browse(client, 0, NULL, 4, &count), NP_ERR_INVALID_ARGUMENT, "browse into NULL rooms");
    expect_error(np_client_browse(client, 0, rooms, 4, NULL), NP_ERR_INVALID_ARGUMENT, "browse without count");
    expect_error(np_client_browse(client, 0, rooms, 4, &count), NP_ERR_UNAVAILABLE, "browse an unreachable lobby");

    /* Hosting: refused before anything is sent. */
    np_game_callbacks game = {NULL, state_size, save, load, advance, NULL};
    np_content content;
    memset(&content, 0, sizeof content);
    content.game_name = "g";
    content.core_id = "c-test";
    np_host_settings settings;
    np_host_settings_init(&settings);
    settings.room_name = "r";
    np_match *match = NULL;
    expect_error(np_client_host(client, &settings, &content, 0, &game, &match), NP_ERR_INVALID_ARGUMENT, "input size 0");
    expect_error(np_client_host(client, &settings, &content, 65, &game, &match), NP_ERR_INVALID_ARGUMENT, "input size 65");
    expect_error(np_client_host(client, &settings, &content, 2, NULL, &match), NP_ERR_INVALID_ARGUMENT, "NULL callbacks");
    np_game_callbacks no_advance = game;
    no_advance.advance = NULL;
    expect_error(np_client_host(client, &settings, &content, 2, &no_advance, &match), NP_ERR_INVALID_ARGUMENT,
                 "callbacks without advance");
    settings.max_players = 9;
    expect_error(np_client_host(client, &settings, &content, 2, &game, &match), NP_ERR_INVALID_ARGUMENT, "9 players");
    settings.max_players = 2;
    settings.frame_delay = 16;
    expect_error(np_client_host(client, &settings, &content, 2, &game, &match), NP_ERR_INVALID_ARGUMENT, "frame delay 16");
    settings.frame_delay = -1;
    settings.struct_size = 8;
    expect_error(np_client_host(client, &settings, &content, 2, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "settings with a short struct_size");
    np_host_settings_init(&settings);
    settings.room_name = "r";
    expect_error(np_client_host(client, &settings, &content, 2, &game, &match), NP_ERR_UNAVAILABLE,
                 "host with an unreachable coordinator");
    expect(match == NULL, "no match on errors");
    /* Strings past the wire's limits are the caller's mistake, found before anything is sent:
     * they failed at the send and came back UNAVAILABLE, which no retry changes. */
    char long_text[201];
    memset(long_text, 'x', 200);
    long_text[200] = 0;
    content.game_name = long_text;
    expect_error(np_client_host(client, &settings, &content, 2, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "a game name of 200 bytes");
    expect(strstr(np_last_error(), "game_name") != NULL, "the error names the game name");
    settings.lan = 1;
    expect_error(np_client_host(client, &settings, &content, 2, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "a LAN room with a game name of 200 bytes");
    settings.lan = 0;
    content.game_name = "g";
    settings.region = long_text + 160;  /* 40 bytes */
    expect_error(np_client_host(client, &settings, &content, 2, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "a region of 40 bytes");
    settings.region = NULL;
    settings.password = long_text;
    expect_error(np_client_host(client, &settings, &content, 2, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "a password of 200 bytes");
    settings.password = NULL;

    /* Joining needs a room with a session. */
    np_room room;
    memset(&room, 0, sizeof room);
    expect_error(np_client_join(client, &room, &content, "", 0, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "join a room without a session");
    expect_error(np_client_join(client, NULL, &content, "", 0, &game, &match), NP_ERR_INVALID_ARGUMENT, "join NULL");
    expect_error(np_client_spectate(client, &room, NULL, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "spectate a room without a session");
    strcpy(room.session_id, "s-1");
    expect_error(np_client_join(client, &room, &content, long_text, 0, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "join with a password of 200 bytes");
    expect(strstr(np_last_error(), "password") != NULL, "the error names the password");
    expect_error(np_client_spectate(client, &room, long_text, &game, &match), NP_ERR_INVALID_ARGUMENT,
                 "spectate with a password of 200 bytes");
    expect_error(np_client_join(client, &room, &content, "", 0, &game, &match), NP_ERR_UNAVAILABLE,
                 "join with an unreachable coordinator");
    memset(&room, 0, sizeof room);

    /* Matches: NULL, a client passed as a match, made-up handles. */
    uint8_t input[2] = {0};
    np_tick_result tick;
    np_hud hud;
    np_match_status status;
    uint64_t checksum;
    expect_error(np_match_tick(NULL, input, 2, &tick), NP_ERR_INVALID_HANDLE, "tick a NULL match");
    expect_error(np_match_tick((np_match *)client, input, 2, &tick), NP_ERR_INVALID_HANDLE, "tick a client");
    expect_error(np_match_tick((np_match *)&room, input, 2, &tick), NP_ERR_INVALID_HANDLE, "tick a made-up handle");
    expect_error(np_match_get_hud(NULL, &hud), NP_ERR_INVALID_HANDLE, "HUD of NULL");
    expect_error(np_match_get_status(NULL, &status), NP_ERR_INVALID_HANDLE, "status of NULL");
    expect_error(np_match_reported_checksum(NULL, 60, &checksum), NP_ERR_INVALID_HANDLE, "checksum of NULL");
    expect_error(np_match_leave(NULL, 0), NP_ERR_INVALID_HANDLE, "leave NULL");
    expect_error(np_match_start_now(NULL), NP_ERR_INVALID_HANDLE, "start NULL");
    expect_error(np_match_send_chat(NULL, "hi"), NP_ERR_INVALID_HANDLE, "chat on NULL");
    np_chat_line line;
    expect_error(np_match_next_chat(NULL, &line), NP_ERR_INVALID_HANDLE, "read chat on NULL");
    np_match_free(NULL);
    np_match_free((np_match *)client);
    expect(np_client_browse(client, 0, rooms, 4, &count) == NP_ERR_UNAVAILABLE, "freeing a client as a match does nothing");

    /* A game whose save fails: a one-player LAN room (its relay in this process, its beacon on
     * a port of its own) starts at once; the first save fails, the match is left and every
     * tick says NP_ERR_GAME. */
    np_client_config lan_config;
    np_client_config_init(&lan_config);
    lan_config.name = "c-lan";
    lan_config.discovery = "";
    lan_config.coordinator = "";
    lan_config.lan_port = (uint16_t)atoi(argv[2]);
    np_client *lan_client = NULL;
    expect(np_client_create(&lan_config, &lan_client) == NP_OK, "LAN client created");

    /* Chat: a one-player LAN room's line comes back from its relay (it sends each to everyone);
     * it is read once, then there is none. */
    np_host_settings_init(&settings);
    settings.room_name = "chatty";
    settings.max_players = 1;
    settings.lan = 1;
    expect(np_client_host(lan_client, &settings, &content, 2, &game, &match) == NP_OK && match != NULL, "chat room hosted");
    expect_error(np_match_next_chat(match, NULL), NP_ERR_INVALID_ARGUMENT, "read chat into NULL");
    expect_error(np_match_next_chat(match, &line), NP_ERR_NOT_FOUND, "no chat line yet");
    /* Before the relay knows the match, a line cannot go: it says so (it said OK and dropped it). */
    expect_error(np_match_send_chat(match, "too early"), NP_ERR_UNAVAILABLE, "chat before the relay knows us");
    int sent = 0, heard = 0;
    for (int i = 0; i < 600 && !heard; i++) {
        expect(np_match_tick(match, input, 2, &tick) == NP_OK, "the chat room ticks");
        if (!sent && np_match_get_status(match, &status) == NP_OK && status.running) {
            expect(np_match_send_chat(match, "hello from C") == NP_OK, "chat sent");
            sent = 1;
        }
        heard = np_match_next_chat(match, &line) == NP_OK;
        pause_ms(5);
    }
    expect(heard && strcmp(line.text, "hello from C") == 0 && strcmp(line.from, "c-lan") == 0 && line.slot == 1 &&
               line.sent_at_unix_ms > 0, "the chat line came back with its sender");
    expect_error(np_match_next_chat(match, &line), NP_ERR_NOT_FOUND, "a line is read once");
    np_match_free(match);

    np_game_callbacks failing = game;
    failing.save = failing_save;
    np_host_settings_init(&settings);
    settings.room_name = "failing";
    settings.max_players = 1;
    settings.lan = 1;
    expect(np_client_host(lan_client, &settings, &content, 2, &failing, &match) == NP_OK && match != NULL, "LAN room hosted");
    expect_error(np_match_tick(match, input, 3, &tick), NP_ERR_INVALID_ARGUMENT, "tick with a 3-byte input");
    np_result result = NP_OK;
    for (int i = 0; i < 1000 && result == NP_OK; i++) {
        result = np_match_tick(match, input, 2, &tick);
        pause_ms(5);
    }
    expect_error(result, NP_ERR_GAME, "a failing save ends the match with NP_ERR_GAME");
    expect(strstr(np_last_error(), "save returned 5") != NULL, "the reason names the callback");
    expect(np_match_get_status(match, &status) == NP_OK && status.state == NP_STATE_DISCONNECTED &&
               status.reason == NP_REASON_LEFT, "the match was left");
    expect_error(np_match_tick(match, input, 2, &tick), NP_ERR_GAME, "later ticks say so too");
    expect_error(np_match_send_chat(match, "anyone?"), NP_ERR_ENDED, "chat on an ended match");
    np_match_free(match);
    expect_error(np_match_tick(match, input, 2, &tick), NP_ERR_INVALID_HANDLE, "tick a freed match");
    np_match_free(match);

    /* A capacity of SIZE_MAX is room for everything, not a trap. */
    expect(np_client_browse(lan_client, 0, rooms, (size_t)-1, &count) == NP_OK && count == 0, "browse with capacity SIZE_MAX");

    /* Calls back into the match from its own callback: a tick is refused; a free stops every
     * callback at once (the frontend is about to free what they use). */
    np_game_callbacks reentrant = game;
    reentrant.advance = reentrant_advance;
    reentrant.save = save_after_free;
    for (reentrant_mode = 1; reentrant_mode <= 2; reentrant_mode++) {
        np_host_settings_init(&settings);
        settings.room_name = reentrant_mode == 1 ? "reentrant-tick" : "reentrant-free";
        settings.max_players = 1;
        settings.lan = 1;
        expect(np_client_host(lan_client, &settings, &content, 2, &reentrant, &reentered) == NP_OK, "re-entrant room hosted");
        result = NP_OK;
        for (int i = 0; i < 1000 && !freed_in_callback && (reentrant_mode == 2 || reentrant_tick == NP_OK); i++) {
            result = np_match_tick(reentered, input, 2, &tick);
            pause_ms(5);
        }
        if (reentrant_mode == 1) {
            expect_error(reentrant_tick, NP_ERR_INVALID_ARGUMENT, "a tick from inside a callback is refused");
            np_match_free(reentered);
        } else {
            expect(freed_in_callback, "the match was freed from inside its advance callback");
            expect(advances_after_free == 0, "no callback ran after the free");
            expect_error(np_match_tick(reentered, input, 2, &tick), NP_ERR_INVALID_HANDLE, "the freed match is gone");
        }
    }

    /* Calls on one match from two threads at once: the second is refused, not raced. */
    np_game_callbacks holding = game;
    holding.advance = holding_advance;
    np_host_settings_init(&settings);
    settings.room_name = "two threads";
    settings.max_players = 1;
    settings.lan = 1;
    expect(np_client_host(lan_client, &settings, &content, 2, &holding, &contended) == NP_OK, "two-thread room hosted");
    pthread_t other;
    expect(pthread_create(&other, NULL, other_thread, NULL) == 0, "second thread started");
    for (int i = 0; i < 1000 && !atomic_load(&other_done); i++) {
        expect(np_match_tick(contended, input, 2, &tick) == NP_OK, "the two-thread room ticks");
        pause_ms(5);
    }
    pthread_join(other, NULL);
    if (other_result != NP_ERR_INVALID_ARGUMENT || strstr(other_error, "another thread") == NULL) {
        printf("FAILED a call from another thread mid-tick is refused: returned %d, '%s'\n", other_result, other_error);
        exit(1);
    }
    expect(1, "a call from another thread mid-tick is refused");
    np_match_status after;
    expect(np_match_tick(contended, input, 2, &tick) == NP_OK && np_match_get_status(contended, &after) == NP_OK,
           "the match goes on after the refusal");
    np_match_free(contended);

    /* A chat line of 512 characters of three bytes each goes out cut to 512 bytes, whole
     * characters only (it was dropped as invalid). */
    np_host_settings_init(&settings);
    settings.room_name = "long chat";
    settings.max_players = 1;
    settings.lan = 1;
    expect(np_client_host(lan_client, &settings, &content, 2, &game, &match) == NP_OK, "long-chat room hosted");
    char long_line[512 * 3 + 1];
    for (int i = 0; i < 512; i++) memcpy(long_line + 3 * i, "\xe3\x81\x82", 3);  /* HIRAGANA A */
    long_line[512 * 3] = 0;
    sent = 0, heard = 0;
    for (int i = 0; i < 3000 && !heard; i++) {
        expect(np_match_tick(match, input, 2, &tick) == NP_OK, "the long-chat room ticks");
        if (!sent && np_match_get_status(match, &status) == NP_OK && status.running) {
            expect(np_match_send_chat(match, long_line) == NP_OK, "long chat sent");
            sent = 1;
        }
        heard = np_match_next_chat(match, &line) == NP_OK;
        pause_ms(5);
    }
    expect(heard && strlen(line.text) == 510 && memcmp(line.text, long_line, 510) == 0,
           "the long chat line came back cut to 170 whole characters (510 bytes)");
    np_match_free(match);
    np_client_free(lan_client);

    /* A freed client is refused, and freeing it again does nothing. */
    np_client_free(client);
    expect_error(np_client_browse(client, 0, rooms, 4, &count), NP_ERR_INVALID_HANDLE, "browse a freed client");
    np_client_free(client);
    np_client_free(NULL);
    np_client_config_init(NULL);
    np_host_settings_init(NULL);
    printf("ERRORS OK %d checks\n", checks);
    return 0;
}
