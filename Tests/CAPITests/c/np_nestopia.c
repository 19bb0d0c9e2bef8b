/*
 * A minimal C frontend over netplay.h: it loads a libretro core itself (dlopen, libretro.h's
 * API) and plays a netplay match through the cluster, hosting or joining, with nothing of the
 * toolkit but libNetplayC. Built and run by Tests/CAPITests; the main loop is the one
 * docs/capi.md shows.
 *
 *   np_nestopia host|join CORE.so CONTENT DISCOVERY COORDINATOR ROOM FRAMES FPS SEED
 *
 * Prints "RESULT frames=N checksum=0x... role=player slot=S start=F initial=0x... ..." (as
 * netplay-peer does) and exits 0, or "FAILED ..." and exits 1 ("REFUSED code=N" for a refusal).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netplay.h"
#include "nlr_libretro_api.h"

#define PORTS 8
#define MAX_VARIABLES 128
/* The NES pad without nestopia's turbo X and Y, whose phase its states miss: what
 * netplay-peer passes to nestopia (Libretro's JoypadButtons.nes). */
#define NES_BUTTONS 0x01FDu

/* The core, its entry points and what the frontend answers it. libretro callbacks carry no
 * context, so a frontend keeps its core in a global. */
static struct {
    void *library;
    void (*set_environment)(retro_environment_t);
    void (*set_video_refresh)(retro_video_refresh_t);
    void (*set_audio_sample)(retro_audio_sample_t);
    void (*set_audio_sample_batch)(retro_audio_sample_batch_t);
    void (*set_input_poll)(retro_input_poll_t);
    void (*set_input_state)(retro_input_state_t);
    void (*init)(void);
    void (*deinit)(void);
    void (*get_system_info)(struct retro_system_info *);
    void (*get_system_av_info)(struct retro_system_av_info *);
    void (*set_controller_port_device)(unsigned, unsigned);
    void (*run)(void);
    size_t (*serialize_size)(void);
    bool (*serialize)(void *, size_t);
    bool (*unserialize)(const void *, size_t);
    bool (*load_game)(const struct retro_game_info *);
    void (*unload_game)(void);

    const char *core_path;
    char directory[256];
    uint64_t quirks;
    char *keys[MAX_VARIABLES];
    char *values[MAX_VARIABLES];
    int variable_count;
    bool variables_updated;
    uint16_t joypad[PORTS];
    int players;
    /* retro_serialize_size at load: every state has this size (see load_core). */
    size_t state_size;
    /* GET_AUDIO_VIDEO_ENABLE's answer: 3 (video and audio), 0 while re-simulating. */
    int av_enable;
    uint64_t video_frames, skipped_video;
} core;

static void fail(const char *what) {
    printf("FAILED %s: %s\n", what, np_last_error());
    fflush(stdout);
    exit(1);
}

/* ---- libretro: the callbacks a frontend gives its core ---------------------------------- */

static void core_log(enum retro_log_level level, const char *fmt, ...) {
    if (level < RETRO_LOG_WARN) return;
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
}

/* Core options keep their first choice, as the toolkit's libretro host does. */
static void declare_variables(const struct retro_variable *list) {
    for (; list->key != NULL && core.variable_count < MAX_VARIABLES; list++) {
        const char *spec = list->value ? list->value : "";
        const char *choices = strstr(spec, "; ");
        choices = choices ? choices + 2 : spec;
        size_t length = strcspn(choices, "|");
        core.keys[core.variable_count] = strdup(list->key);
        core.values[core.variable_count] = strndup(choices, length);
        core.variable_count++;
    }
    core.variables_updated = true;
}

static bool environment(unsigned command, void *data) {
    switch (command) {
    case RETRO_ENVIRONMENT_GET_CAN_DUPE:
    case RETRO_ENVIRONMENT_GET_FASTFORWARDING:
        if (data) *(bool *)data = command == RETRO_ENVIRONMENT_GET_CAN_DUPE;
        return data != NULL;
    case RETRO_ENVIRONMENT_SET_PIXEL_FORMAT:
        return data && *(const int *)data >= 0 && *(const int *)data <= 2;
    case RETRO_ENVIRONMENT_GET_SYSTEM_DIRECTORY:
    case RETRO_ENVIRONMENT_GET_CORE_ASSETS_DIRECTORY:
    case RETRO_ENVIRONMENT_GET_SAVE_DIRECTORY:
        if (data) *(const char **)data = core.directory;
        return data != NULL;
    case RETRO_ENVIRONMENT_GET_LIBRETRO_PATH:
        if (data) *(const char **)data = core.core_path;
        return data != NULL;
    case RETRO_ENVIRONMENT_SET_VARIABLES:
        if (data) declare_variables(data);
        return data != NULL;
    case RETRO_ENVIRONMENT_GET_VARIABLE: {
        struct retro_variable *variable = data;
        if (!variable || !variable->key) return false;
        for (int i = 0; i < core.variable_count; i++) {
            if (strcmp(core.keys[i], variable->key) == 0) {
                variable->value = core.values[i];
                return true;
            }
        }
        variable->value = NULL;
        return false;
    }
    case RETRO_ENVIRONMENT_GET_VARIABLE_UPDATE:
        if (data) *(bool *)data = core.variables_updated;
        core.variables_updated = false;
        return data != NULL;
    case RETRO_ENVIRONMENT_GET_LOG_INTERFACE:
        if (data) ((struct retro_log_callback *)data)->log = core_log;
        return data != NULL;
    case RETRO_ENVIRONMENT_GET_INPUT_BITMASKS:
        return true;
    case RETRO_ENVIRONMENT_GET_INPUT_DEVICE_CAPABILITIES:
        if (data) *(uint64_t *)data = 1u << RETRO_DEVICE_JOYPAD;
        return data != NULL;
    case RETRO_ENVIRONMENT_GET_INPUT_MAX_USERS:
        if (data) *(unsigned *)data = (unsigned)(core.players > 2 ? core.players : 2);
        return data != NULL;
    case RETRO_ENVIRONMENT_GET_LANGUAGE:
        if (data) *(unsigned *)data = 0;
        return data != NULL;
    case RETRO_ENVIRONMENT_GET_SAVESTATE_CONTEXT:
        /* States go to other instances of this core on other machines: netplay rollback. */
        if (data) *(int *)data = RETRO_SAVESTATE_CONTEXT_ROLLBACK_NETPLAY;
        return data != NULL;
    case RETRO_ENVIRONMENT_GET_AUDIO_VIDEO_ENABLE:
        /* Off while a rollback re-simulates frames already shown (the Swift host answers alike). */
        if (data) *(int *)data = core.av_enable;
        return data != NULL;
    case RETRO_ENVIRONMENT_SET_SERIALIZATION_QUIRKS:
        if (data) core.quirks = *(const uint64_t *)data;
        return data != NULL;
    case RETRO_ENVIRONMENT_SET_SYSTEM_AV_INFO:
    case RETRO_ENVIRONMENT_SET_GEOMETRY:
    case RETRO_ENVIRONMENT_SET_MESSAGE:
    case RETRO_ENVIRONMENT_SET_MESSAGE_EXT:
    case RETRO_ENVIRONMENT_SHUTDOWN:
    case RETRO_ENVIRONMENT_SET_ROTATION:
    case RETRO_ENVIRONMENT_SET_PERFORMANCE_LEVEL:
    case RETRO_ENVIRONMENT_SET_INPUT_DESCRIPTORS:
    case RETRO_ENVIRONMENT_SET_SUPPORT_NO_GAME:
    case RETRO_ENVIRONMENT_SET_SUBSYSTEM_INFO:
    case RETRO_ENVIRONMENT_SET_CONTROLLER_INFO:
    case RETRO_ENVIRONMENT_SET_MEMORY_MAPS:
    case RETRO_ENVIRONMENT_SET_SUPPORT_ACHIEVEMENTS:
        return true;
    default:
        return false;
    }
}

static void video_refresh(const void *data, unsigned width, unsigned height, size_t pitch) {
    (void)data, (void)width, (void)height, (void)pitch;
    core.video_frames++;
}
static void audio_sample(int16_t left, int16_t right) { (void)left, (void)right; }
static size_t audio_sample_batch(const int16_t *data, size_t frames) { (void)data; return frames; }
static void input_poll(void) {}
static int16_t input_state(unsigned port, unsigned device, unsigned index, unsigned id) {
    if (port >= PORTS || (device & RETRO_DEVICE_MASK) != RETRO_DEVICE_JOYPAD || index != 0) return 0;
    if (id == RETRO_DEVICE_ID_JOYPAD_MASK) return (int16_t)core.joypad[port];
    return id < 16 ? (int16_t)((core.joypad[port] >> id) & 1u) : 0;
}

static void *entry_point(const char *name) {
    void *symbol = dlsym(core.library, name);
    if (!symbol) {
        printf("FAILED %s has no %s\n", core.core_path, name);
        exit(1);
    }
    return symbol;
}

/*
 * Loads the core and its content the way every peer must: with glibc's M_PERTURB set, freshly
 * allocated memory is zero-filled while the core loads, so a byte nestopia never writes is the
 * same in every process (the toolkit's DeterministicHeap does the same in netplay-peer).
 */
static void load_core(const char *core_path, const char *content_path, uint8_t **content, size_t *content_size,
                      struct retro_system_info *info, double *fps) {
    core.core_path = core_path;
    core.av_enable = 3;
    snprintf(core.directory, sizeof core.directory, "/tmp/np-nestopia-XXXXXX");
    if (!mkdtemp(core.directory)) fail("mkdtemp");
    FILE *file = fopen(content_path, "rb");
    if (!file) fail("cannot open the content");
    fseek(file, 0, SEEK_END);
    *content_size = (size_t)ftell(file);
    fseek(file, 0, SEEK_SET);
    *content = malloc(*content_size);
    if (fread(*content, 1, *content_size, file) != *content_size) fail("cannot read the content");
    fclose(file);

    mallopt(M_PERTURB, 0xFF);
    core.library = dlopen(core_path, RTLD_NOW | RTLD_LOCAL);
    if (!core.library) {
        printf("FAILED dlopen %s: %s\n", core_path, dlerror());
        exit(1);
    }
    core.set_environment = entry_point("retro_set_environment");
    core.set_video_refresh = entry_point("retro_set_video_refresh");
    core.set_audio_sample = entry_point("retro_set_audio_sample");
    core.set_audio_sample_batch = entry_point("retro_set_audio_sample_batch");
    core.set_input_poll = entry_point("retro_set_input_poll");
    core.set_input_state = entry_point("retro_set_input_state");
    core.init = entry_point("retro_init");
    core.deinit = entry_point("retro_deinit");
    core.get_system_info = entry_point("retro_get_system_info");
    core.get_system_av_info = entry_point("retro_get_system_av_info");
    core.set_controller_port_device = entry_point("retro_set_controller_port_device");
    core.run = entry_point("retro_run");
    core.serialize_size = entry_point("retro_serialize_size");
    core.serialize = entry_point("retro_serialize");
    core.unserialize = entry_point("retro_unserialize");
    core.load_game = entry_point("retro_load_game");
    core.unload_game = entry_point("retro_unload_game");

    core.set_environment(environment);
    core.init();
    core.set_video_refresh(video_refresh);
    core.set_audio_sample(audio_sample);
    core.set_audio_sample_batch(audio_sample_batch);
    core.set_input_poll(input_poll);
    core.set_input_state(input_state);
    core.get_system_info(info);
    struct retro_game_info game = {content_path, info->need_fullpath ? NULL : *content,
                                   info->need_fullpath ? 0 : *content_size, NULL};
    if (!core.load_game(&game)) fail("the core refused the content");
    struct retro_system_av_info av;
    core.get_system_av_info(&av);
    *fps = av.timing.fps;
    for (unsigned port = 0; port < (unsigned)(core.players > 2 ? core.players : 2); port++)
        core.set_controller_port_device(port, RETRO_DEVICE_JOYPAD);
    if (core.serialize_size() == 0 && (core.quirks & RETRO_SERIALIZATION_QUIRK_MUST_INITIALIZE)) core.run();
    /* The state size is fixed at load, as the toolkit's libretro host does: nestopia's
     * retro_serialize_size shrinks by 20 bytes after the first frame, and a peer asking it
     * every time would save (and hash) states of another size than the others. */
    core.state_size = core.serialize_size();
    mallopt(M_PERTURB, 0);
}

/* ---- netplay: the game callbacks ---------------------------------------------------------- */

static size_t game_state_size(void *user) { (void)user; return core.state_size; }

static int game_save(void *user, uint8_t *buffer, size_t size) {
    (void)user;
    return core.serialize(buffer, size) ? 0 : 1;
}

static int game_load(void *user, const uint8_t *data, size_t size) {
    (void)user;
    if (size != core.state_size) return 1;
    return core.unserialize(data, size) ? 0 : 1;
}

static void game_advance(void *user, const uint8_t *inputs, size_t input_size, int player_count,
                         const uint8_t *statuses, int resimulating) {
    (void)user, (void)statuses;
    for (int player = 0; player < player_count && player < core.players && player < PORTS; player++) {
        const uint8_t *input = inputs + (size_t)player * input_size;
        uint16_t buttons = (uint16_t)(input[0] | (input_size > 1 ? input[1] << 8 : 0));
        core.joypad[player] = buttons & NES_BUTTONS;
    }
    uint64_t before = core.video_frames;
    core.av_enable = resimulating ? 0 : 3;
    core.run();
    core.av_enable = 3;
    if (resimulating) core.skipped_video += core.video_frames - before; /* a frontend skips these */
}

/* np_hash_bytes of the serialized state, as the Swift host computes it: the state size of
 * load, a zeroed buffer (nestopia writes fewer bytes than the size; the rest must be the same
 * on every peer, and the buffer `save` gets from the library is zeroed too). */
static uint64_t state_checksum(void) {
    size_t size = core.state_size;
    uint8_t *buffer = calloc(1, size);
    uint64_t checksum = core.serialize(buffer, size) ? np_hash_bytes(buffer, size) : 0;
    free(buffer);
    return checksum;
}

static uint64_t game_checksum(void *user) { (void)user; return state_checksum(); }

/* ---- the frontend ------------------------------------------------------------------------ */

/* Random held buttons, a new set every 8 frames. */
static uint16_t script_input(uint64_t seed, int64_t frame) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + (uint64_t)(frame / 8) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return (uint16_t)x;
}

static void sleep_seconds(double seconds) {
    if (seconds <= 0) return;
    struct timespec delay = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&delay, NULL);
}

/* Paces the game loop: sleeps until `interval` seconds after the previous deadline (absolute
 * deadlines, so the time a tick takes does not slow the game down). */
static void wait_for_next_frame(struct timespec *deadline, double interval) {
    long nanoseconds = deadline->tv_nsec + (long)(interval * 1e9);
    deadline->tv_sec += nanoseconds / 1000000000L;
    deadline->tv_nsec = nanoseconds % 1000000000L;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double behind = (double)(now.tv_sec - deadline->tv_sec) + (double)(now.tv_nsec - deadline->tv_nsec) / 1e9;
    if (behind > 0.1) *deadline = now; /* far behind (a stall): start again from now */
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, deadline, NULL);
}

static np_room find_room(np_client *client, const char *name) {
    np_room rooms[64];
    for (int attempt = 0; attempt < 100; attempt++) {
        size_t count = 0;
        np_result result = np_client_browse(client, 0, rooms, 64, &count);
        if (result != NP_OK && result != NP_ERR_BUFFER_TOO_SMALL && result != NP_ERR_UNAVAILABLE) fail("browse");
        for (size_t i = 0; i < count && i < 64; i++)
            if (strcmp(rooms[i].room_name, name) == 0) return rooms[i];
        sleep_seconds(0.2);
    }
    printf("FAILED no room named %s\n", name);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 10 || (strcmp(argv[1], "host") != 0 && strcmp(argv[1], "join") != 0)) {
        fprintf(stderr, "usage: %s host|join CORE CONTENT DISCOVERY COORDINATOR ROOM FRAMES FPS SEED\n", argv[0]);
        return 2;
    }
    int hosting = strcmp(argv[1], "host") == 0;
    const char *room_name = argv[6];
    int64_t frames = atoll(argv[7]);
    double fps = atof(argv[8]);
    uint64_t seed = strtoull(argv[9], NULL, 10);
    if ((np_api_version() >> 16) != (NP_API_VERSION >> 16)) fail("libNetplayC speaks another major version");

    /* 1. The core and its content, and what identifies them for the room. */
    core.players = 2;
    uint8_t *content_bytes;
    size_t content_size;
    struct retro_system_info info;
    double core_fps;
    load_core(argv[2], argv[3], &content_bytes, &content_size, &info, &core_fps);
    uint64_t initial = state_checksum();
    char core_id[64], game_name[128];
    np_content content;
    memset(&content, 0, sizeof content);
    if (np_content_digest(content_bytes, content_size, &content.crc32, content.md5) != NP_OK) fail("digest");
    if (np_libretro_core_id(info.library_name, core_id, sizeof core_id) != NP_OK) fail("core id");
    const char *base = strrchr(argv[3], '/') ? strrchr(argv[3], '/') + 1 : argv[3];
    snprintf(game_name, sizeof game_name, "%s", base);
    char *dot = strrchr(game_name, '.');
    if (dot) *dot = '\0';
    content.game_name = game_name;
    content.core_id = core_id;
    content.core_version = info.library_version;
    content.system = dot ? dot + 1 : "";
    content.size = content_size;

    /* 2. A client for the cluster. */
    np_client_config config;
    np_client_config_init(&config);
    config.name = hosting ? "c-host" : "c-join";
    config.discovery = argv[4];
    config.coordinator = argv[5];
    np_client *client;
    if (np_client_create(&config, &client) != NP_OK) fail("np_client_create");

    /* 3. Host a room, or find it and join. */
    np_game_callbacks game = {NULL, game_state_size, game_save, game_load, game_advance, game_checksum};
    np_match *match;
    if (hosting) {
        char options[128];
        snprintf(options, sizeof options, "libretro;players=%d;buttons=%x;initial=%llx", core.players, NES_BUTTONS,
                 (unsigned long long)initial);
        np_host_settings settings;
        np_host_settings_init(&settings);
        settings.room_name = room_name;
        settings.max_players = core.players;
        settings.frame_rate_millihertz = (int)(fps * 1000);
        settings.prediction_window = 12;
        settings.game_options = (const uint8_t *)options;
        settings.game_options_size = strlen(options);
        if (np_client_host(client, &settings, &content, 2, &game, &match) != NP_OK) fail("np_client_host");
        /* A wrong input size is refused and changes nothing. */
        uint8_t wide[3] = {0};
        if (np_match_tick(match, wide, 3, NULL) != NP_ERR_INVALID_ARGUMENT) fail("a 3-byte input was accepted");
    } else {
        np_room room = find_room(client, room_name);
        /* A session that does not exist: NP_ERR_NOT_FOUND, the wire's NOT_FOUND (40) with it. */
        np_room ghost = room;
        snprintf(ghost.session_id, sizeof ghost.session_id, "s-00000000deadbeef");
        np_match *none = NULL;
        if (np_client_join(client, &ghost, &content, "", 0, &game, &none) != NP_ERR_NOT_FOUND || np_last_error_code() != 40)
            fail("joining a session that does not exist was not NP_ERR_NOT_FOUND (40)");
        np_result joined = np_client_join(client, &room, &content, "", 0, &game, &match);
        if (joined == NP_ERR_REFUSED) {
            printf("REFUSED code=%d %s\n", np_last_error_code(), np_last_error());
            return 1;
        }
        if (joined != NP_OK) fail("np_client_join");
    }
    fprintf(stderr, "np_nestopia: %s %s, initial state 0x%llx\n", info.library_name, info.library_version,
            (unsigned long long)initial);

    /* 4. The game loop: one tick per displayed frame, paced as the match asks. */
    np_match_status status;
    uint64_t checksum = 0;
    int announced = 0, first_frame_ran = 0;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    for (;;) {
        np_match_get_status(match, &status);
        uint16_t buttons = script_input(seed, status.current_frame);
        uint8_t input[2] = {(uint8_t)buttons, (uint8_t)(buttons >> 8)};
        np_tick_result tick = {0};
        struct timespec tick_start;
        clock_gettime(CLOCK_MONOTONIC, &tick_start);
        np_result result = np_match_tick(match, input, sizeof input, &tick);
        if (result != NP_OK) fail("np_match_tick");
        if (tick.first_frame_near) {
            /* The start names the moment every player begins: notice it within a millisecond. */
            struct timespec pause = {0, 1000000L};
            nanosleep(&pause, NULL);
            continue;
        }
        if (!first_frame_ran) {
            first_frame_ran = 1;
            deadline = tick_start; /* frames are paced from the one that began the match */
        }
        if (tick.running && !announced) {
            announced = 1;
            fprintf(stderr, "np_nestopia: running from frame %lld\n", (long long)status.start_frame);
        }
        if (np_match_reported_checksum(match, frames, &checksum) == NP_OK) break;
        wait_for_next_frame(&deadline, tick.frame_interval_scale / (status.frame_rate_hz > 0 ? status.frame_rate_hz : fps));
    }
    np_match_get_status(match, &status);
    np_hud hud;
    np_match_get_hud(match, &hud);

    /* 5. The host's leave ends the session: it plays on a second so the others finish first. */
    for (int i = 0; hosting && i < (int)status.frame_rate_hz; i++) {
        uint16_t buttons = script_input(seed, status.current_frame + i);
        uint8_t input[2] = {(uint8_t)buttons, (uint8_t)(buttons >> 8)};
        np_match_tick(match, input, sizeof input, NULL);
        wait_for_next_frame(&deadline, 1.0 / status.frame_rate_hz);
    }
    if (np_match_leave(match, 2.0) != NP_OK) fail("np_match_leave");
    np_match_free(match);
    np_client_free(client);
    printf("RESULT frames=%lld checksum=0x%llx role=player slot=%d start=%lld initial=0x%llx rollbacks=%d "
           "rollback_frames=%d frame_delay=%d skipped_video=%llu\n",
           (long long)frames, (unsigned long long)checksum, status.slot, (long long)status.start_frame,
           (unsigned long long)initial, hud.rollbacks, hud.rollback_frames, hud.frame_delay,
           (unsigned long long)core.skipped_video);
    fflush(stdout);
    core.unload_game();
    core.deinit();
    dlclose(core.library);
    free(content_bytes);
    return 0;
}
