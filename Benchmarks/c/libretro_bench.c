/* Baseline for `netplay-bench libretro`: a bare C program that drives a libretro core directly.
 *
 *   libretro_bench CORE CONTENT FRAMES REPEATS
 *
 * dlopens CORE, loads CONTENT (in memory, or by path when the core needs the full path), runs
 * 60 warm-up frames, then measures, each as the fastest chunk of 10 operations in REPEATS runs of
 * FRAMES operations (FRAMES a multiple of 10):
 *   run_ns       one retro_run
 *   save_ns      one retro_serialize into a zeroed slot of a 32-state ring
 *   load_ns      one retro_unserialize
 *   rollback_ns  one frame of "an 8-frame rollback every frame", the core calls the rollback
 *                engine makes per frame when every remote input arrives 8 frames late and
 *                differs from the prediction: load the state of frame N-8, re-run N-8 .. N-1
 *                (saving the states of N-7 .. N-1 before running them), then save and run the
 *                new frame N; every 30th frame's state is hashed for the desync check (the
 *                saved copy when it is saved next, else a fresh serialization).
 * and prints one line: "state_size=... run_ns=... save_ns=... load_ns=... rollback_ns=...".
 *
 * Environment answers match the Swift host's where they matter to emulation: pixel format,
 * input bitmasks, core options at their defaults, the savestate context (rollback netplay),
 * empty system and save directories.
 * The state hash is the host's (nlr_hash64 from Sources/CLibretro/include/nlr_host.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nlr_host.h"

#define RING 32
#define LATE 8
#define CHECKSUM_INTERVAL 30
#define CHUNK 10

static retro_run_fn core_run;
static retro_serialize_fn core_serialize;
static retro_unserialize_fn core_unserialize;
static retro_serialize_size_fn core_serialize_size;
static char directory[] = "/tmp/libretro_bench_XXXXXX";
static uint16_t pads[2];
/* Core options: the core declares them with SET_VARIABLES ("Description; first|second|...");
 * like the Swift host, every option gets its first (default) choice. */
#define MAX_VARIABLES 128
static char *variable_keys[MAX_VARIABLES], *variable_values[MAX_VARIABLES];
static int variable_count;
static uint64_t sink;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "libretro_bench: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void *symbol(void *handle, const char *name) {
    void *pointer = dlsym(handle, name);
    if (!pointer) die("missing symbol", name);
    return pointer;
}

static bool environment(unsigned cmd, void *data) {
    switch (cmd) {
    case RETRO_ENVIRONMENT_GET_CAN_DUPE:
        *(bool *)data = true;
        return true;
    case RETRO_ENVIRONMENT_SET_PIXEL_FORMAT:
        return true;
    case RETRO_ENVIRONMENT_GET_SYSTEM_DIRECTORY:
    case RETRO_ENVIRONMENT_GET_SAVE_DIRECTORY:
        *(const char **)data = directory;
        return true;
    case RETRO_ENVIRONMENT_GET_INPUT_BITMASKS:
        return true;
    case RETRO_ENVIRONMENT_SET_VARIABLES:
        for (const struct retro_variable *v = data; v->key && variable_count < MAX_VARIABLES; v++) {
            const char *choices = v->value ? strstr(v->value, "; ") : NULL;
            choices = choices ? choices + 2 : "";
            variable_keys[variable_count] = strdup(v->key);
            variable_values[variable_count] = strndup(choices, strcspn(choices, "|"));
            variable_count++;
        }
        return true;
    case RETRO_ENVIRONMENT_GET_VARIABLE: {
        struct retro_variable *variable = data;
        for (int i = 0; i < variable_count; i++) {
            if (variable->key && strcmp(variable->key, variable_keys[i]) == 0) {
                variable->value = variable_values[i];
                return true;
            }
        }
        variable->value = NULL;
        return false;
    }
    case RETRO_ENVIRONMENT_GET_VARIABLE_UPDATE:
        *(bool *)data = false;
        return true;
    case RETRO_ENVIRONMENT_GET_SAVESTATE_CONTEXT:
        *(int *)data = RETRO_SAVESTATE_CONTEXT_ROLLBACK_NETPLAY;
        return true;
    default:
        return false;
    }
}

static void video_refresh(const void *data, unsigned width, unsigned height, size_t pitch) {
    (void)data, (void)width, (void)height, (void)pitch;
}
static void audio_sample(int16_t left, int16_t right) { (void)left, (void)right; }
static size_t audio_sample_batch(const int16_t *data, size_t frames) { (void)data; return frames; }
static void input_poll(void) {}
static int16_t input_state(unsigned port, unsigned device, unsigned index, unsigned id) {
    if (port >= 2 || (device & RETRO_DEVICE_MASK) != RETRO_DEVICE_JOYPAD || index != 0) return 0;
    if (id == RETRO_DEVICE_ID_JOYPAD_MASK) return (int16_t)pads[port];
    return id < 16 ? (int16_t)((pads[port] >> id) & 1u) : 0;
}

static double least(double a, double b) { return a < b ? a : b; }

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The NES buttons both players hold at `frame` (they change every frame). */
static void set_pads(long frame) {
    pads[0] = (uint16_t)((frame * 37) & 0x1FD);
    pads[1] = (uint16_t)((frame * 91 + 5) & 0x1FD);
}

static void save(unsigned char *slot, size_t size) {
    memset(slot, 0, size);
    if (!core_serialize(slot, size)) die("retro_serialize failed", NULL);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: libretro_bench CORE CONTENT FRAMES REPEATS\n");
        return 2;
    }
    long frames = atol(argv[3]), repeats = atol(argv[4]);
    if (frames < CHUNK || frames % CHUNK != 0 || repeats < 1) {
        die("FRAMES must be a multiple of 10 and REPEATS >= 1", NULL);
    }
    if (!mkdtemp(directory)) die("mkdtemp failed", NULL);

    void *core = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!core) die("dlopen failed", dlerror());
    retro_api_version_fn api_version = (retro_api_version_fn)symbol(core, "retro_api_version");
    if (api_version() != RETRO_API_VERSION) die("libretro API version mismatch", NULL);
    ((retro_set_environment_fn)symbol(core, "retro_set_environment"))(environment);
    ((retro_init_fn)symbol(core, "retro_init"))();
    ((retro_set_video_refresh_fn)symbol(core, "retro_set_video_refresh"))(video_refresh);
    ((retro_set_audio_sample_fn)symbol(core, "retro_set_audio_sample"))(audio_sample);
    ((retro_set_audio_sample_batch_fn)symbol(core, "retro_set_audio_sample_batch"))(audio_sample_batch);
    ((retro_set_input_poll_fn)symbol(core, "retro_set_input_poll"))(input_poll);
    ((retro_set_input_state_fn)symbol(core, "retro_set_input_state"))(input_state);
    core_run = (retro_run_fn)symbol(core, "retro_run");
    core_serialize = (retro_serialize_fn)symbol(core, "retro_serialize");
    core_unserialize = (retro_unserialize_fn)symbol(core, "retro_unserialize");
    core_serialize_size = (retro_serialize_size_fn)symbol(core, "retro_serialize_size");

    struct retro_system_info info;
    memset(&info, 0, sizeof info);
    ((retro_get_system_info_fn)symbol(core, "retro_get_system_info"))(&info);
    struct retro_game_info game = {argv[2], NULL, 0, NULL};
    void *content = NULL;
    if (!info.need_fullpath) {
        FILE *file = fopen(argv[2], "rb");
        if (!file) die("cannot open content", argv[2]);
        fseek(file, 0, SEEK_END);
        long length = ftell(file);
        fseek(file, 0, SEEK_SET);
        content = malloc(length > 0 ? (size_t)length : 1);
        if (!content || fread(content, 1, (size_t)length, file) != (size_t)length) die("cannot read content", argv[2]);
        fclose(file);
        game.data = content;
        game.size = (size_t)length;
    }
    if (!((retro_load_game_fn)symbol(core, "retro_load_game"))(&game)) die("the core rejected the content", argv[2]);
    for (unsigned port = 0; port < 2; port++) {
        ((retro_set_controller_port_device_fn)symbol(core, "retro_set_controller_port_device"))(port, RETRO_DEVICE_JOYPAD);
    }
    size_t size = core_serialize_size();
    if (size == 0) die("the core cannot save states", NULL);

    unsigned char *ring = malloc(RING * size), *scratch = malloc(size);
    if (!ring || !scratch) die("out of memory", NULL);
    long frame = 0;
    for (; frame < 60; frame++) {
        set_pads(frame);
        core_run();
    }

    /* Each figure is the fastest chunk of CHUNK operations over all runs: on a shared machine
     * that is the cost without preemption (the Swift side measures the same way). */
    double best_run = 1e30, best_save = 1e30, best_load = 1e30, best_rollback = 1e30;
    for (long repeat = 0; repeat < repeats; repeat++) {
        for (long i = 0; i < frames; i += CHUNK) {
            double start = now_ns();
            for (long j = 0; j < CHUNK; j++) {
                set_pads(frame++);
                core_run();
            }
            best_run = least(best_run, (now_ns() - start) / CHUNK);
        }
        for (long i = 0; i < frames; i += CHUNK) {
            double start = now_ns();
            for (long j = i; j < i + CHUNK; j++) save(ring + (size_t)(j % RING) * size, size);
            best_save = least(best_save, (now_ns() - start) / CHUNK);
        }
        for (long i = 0; i < frames; i += CHUNK) {
            double start = now_ns();
            for (long j = i; j < i + CHUNK; j++) {
                if (!core_unserialize(ring + (size_t)(j % RING) * size, size)) die("retro_unserialize failed", NULL);
            }
            best_load = least(best_load, (now_ns() - start) / CHUNK);
        }

        /* Rollback: the states of frames base .. base+LATE-1 are in the ring first. */
        long base = frame;
        for (long f = base; f < base + LATE; f++) {
            save(ring + (size_t)(f % RING) * size, size);
            set_pads(f);
            core_run();
        }
        for (long chunk = base + LATE; chunk < base + LATE + frames; chunk += CHUNK) {
            double start = now_ns();
            for (long n = chunk; n < chunk + CHUNK; n++) {
                if (!core_unserialize(ring + (size_t)((n - LATE) % RING) * size, size)) {
                    die("retro_unserialize failed", NULL);
                }
                for (long x = n - LATE; x <= n; x++) {
                    unsigned char *slot = ring + (size_t)(x % RING) * size;
                    if (x > n - LATE) save(slot, size);
                    if (x % CHECKSUM_INTERVAL == 0 && x > n - LATE) sink += nlr_hash64(slot, size);
                    set_pads(x);
                    core_run();
                    if ((x + 1) % CHECKSUM_INTERVAL == 0 && x == n) {
                        save(scratch, size);
                        sink += nlr_hash64(scratch, size);
                    }
                }
            }
            best_rollback = least(best_rollback, (now_ns() - start) / CHUNK);
        }
        frame = base + LATE + frames;
    }
    printf("state_size=%zu run_ns=%.0f save_ns=%.0f load_ns=%.0f rollback_ns=%.0f sink=%llu\n", size, best_run,
           best_save, best_load, best_rollback, (unsigned long long)(sink & 0xFF));

    ((retro_unload_game_fn)symbol(core, "retro_unload_game"))();
    ((retro_deinit_fn)symbol(core, "retro_deinit"))();
    dlclose(core);
    free(content);
    free(ring);
    free(scratch);
    rmdir(directory);
    for (int i = 0; i < variable_count; i++) {
        free(variable_keys[i]);
        free(variable_values[i]);
    }
    return 0;
}
