/*
 * C side of the Netplay libretro host.
 *
 * libretro callbacks are plain C function pointers without a context argument, so a process
 * cannot tell two loaded cores' callbacks apart unless each core gets its own functions. This
 * file provides NLR_MAX_SLOTS sets of callbacks ("slots"); each set forwards to its slot's
 * state. A host claims a slot, hands that slot's callbacks to its core, and releases the slot
 * when the core is unloaded. Input, video and audio are answered in C (no call into Swift on
 * the per-frame path); the environment and log callbacks forward to handlers with a context.
 */
#ifndef NLR_HOST_H
#define NLR_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nlr_libretro_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Cores that may be loaded at once in one process. */
#define NLR_MAX_SLOTS 8
/* Controller ports with input (the rollback engine has at most 8 players). */
#define NLR_MAX_PORTS 8

/* Answers an environment command for the slot's owner; `context` is the owner's pointer. */
typedef bool (*nlr_environment_handler)(void *context, unsigned cmd, void *data);
/* Receives one formatted log line from the core. */
typedef void (*nlr_log_handler)(void *context, int level, const char *message);

/* The state behind one slot's callbacks. */
typedef struct nlr_slot {
    void *context;
    nlr_environment_handler environment;
    nlr_log_handler log;
    /* Buttons held on each port: bit i is RETRO_DEVICE_ID_JOYPAD id i. */
    uint16_t joypad[NLR_MAX_PORTS];
    /* Analog sticks on each port: left x, left y, right x, right y (RETRO_DEVICE_ANALOG). */
    int16_t analog[NLR_MAX_PORTS][4];
    /* What the frontend presents (RETRO_ENVIRONMENT_GET_AUDIO_VIDEO_ENABLE): bit 0 video, bit 1
     * audio. Cleared while a frame is re-simulated during a rollback: it was shown already. */
    int av_enable;
    /* Video frames delivered while video was not presented (re-simulated frames). */
    uint64_t hidden_video_frames;
    /* Video frames the core delivered (including duplicates) and the last frame's size. */
    uint64_t video_frames;
    unsigned video_width;
    unsigned video_height;
    size_t video_pitch;
    /* Stereo audio frames the core delivered. */
    uint64_t audio_frames;
    /* Calls of the input-poll callback. */
    uint64_t input_polls;
    /* Non-zero while claimed. */
    int in_use;
} nlr_slot;

/* Claims a free slot and clears it; returns its index, or -1 when all are in use. Thread-safe. */
int nlr_slot_acquire(void);
/* Returns a slot to the pool. */
void nlr_slot_release(int slot);
/* The slot's state (valid for 0 <= slot < NLR_MAX_SLOTS). */
nlr_slot *nlr_slot_at(int slot);

/* The callbacks bound to `slot`, to hand to a core's retro_set_* functions. */
retro_environment_t nlr_environment_callback(int slot);
retro_video_refresh_t nlr_video_refresh_callback(int slot);
retro_audio_sample_t nlr_audio_sample_callback(int slot);
retro_audio_sample_batch_t nlr_audio_sample_batch_callback(int slot);
retro_input_poll_t nlr_input_poll_callback(int slot);
retro_input_state_t nlr_input_state_callback(int slot);
/* The variadic log function bound to `slot` (formats, then calls the slot's log handler). */
retro_log_printf_t nlr_log_callback(int slot);

/* Sets the buttons held on `port` for the next retro_run. */
static inline void nlr_slot_set_joypad(nlr_slot *slot, unsigned port, uint16_t buttons) {
    if (port < NLR_MAX_PORTS) slot->joypad[port] = buttons;
}

/* Sets the analog sticks on `port` (left x, left y, right x, right y) for the next retro_run. */
static inline void nlr_slot_set_analog(nlr_slot *slot, unsigned port, int16_t lx, int16_t ly, int16_t rx, int16_t ry) {
    if (port >= NLR_MAX_PORTS) return;
    slot->analog[port][0] = lx;
    slot->analog[port][1] = ly;
    slot->analog[port][2] = rx;
    slot->analog[port][3] = ry;
}

/* Answers an input-state query from a slot's joypad masks and sticks (exposed for tests):
 * RETRO_DEVICE_JOYPAD per button or as a mask; RETRO_DEVICE_ANALOG's two sticks (index 0 left,
 * 1 right; id 0 x, 1 y) and its analog buttons (index 2: full scale while the button is held). */
static inline int16_t nlr_input_state(const nlr_slot *slot, unsigned port, unsigned device, unsigned index,
                                      unsigned id) {
    if (port >= NLR_MAX_PORTS) return 0;
    uint16_t buttons = slot->joypad[port];
    switch (device & RETRO_DEVICE_MASK) {
    case RETRO_DEVICE_JOYPAD:
        if (index != 0) return 0;
        if (id == RETRO_DEVICE_ID_JOYPAD_MASK) return (int16_t)buttons;
        return id < 16 ? (int16_t)((buttons >> id) & 1u) : 0;
    case RETRO_DEVICE_ANALOG:
        if (index <= RETRO_DEVICE_INDEX_ANALOG_RIGHT && id <= RETRO_DEVICE_ID_ANALOG_Y)
            return slot->analog[port][index * 2 + id];
        if (index == RETRO_DEVICE_INDEX_ANALOG_BUTTON && id < 16) return ((buttons >> id) & 1u) ? 0x7fff : 0;
        return 0;
    default:
        return 0;
    }
}

/* The joypad part of nlr_input_state (kept for callers that ask only for buttons). */
static inline int16_t nlr_joypad_state(const nlr_slot *slot, unsigned port, unsigned device, unsigned index,
                                       unsigned id) {
    if ((device & RETRO_DEVICE_MASK) != RETRO_DEVICE_JOYPAD) return 0;
    return nlr_input_state(slot, port, device, index, id);
}

/*
 * A 64-bit hash of `size` bytes (four independent multiply-rotate lanes over 32-byte blocks,
 * then the tail, then an avalanche), several bytes per cycle. Used for state checksums by the
 * host and by the C benchmark, so both pay the same price for a checksum.
 */
static inline uint64_t nlr_rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t nlr_hash_round(uint64_t lane, uint64_t word) {
    lane += word * 0xC2B2AE3D27D4EB4FULL;
    lane = nlr_rotl64(lane, 31);
    return lane * 0x9E3779B185EBCA87ULL;
}

static inline uint64_t nlr_hash64(const void *data, size_t size) {
    const unsigned char *bytes = (const unsigned char *)data;
    uint64_t a = 0x60EA27EEADC0B5D6ULL, b = 0xC2B2AE3D27D4EB4FULL, c = 0, d = 0x61C8864E7A143579ULL;
    size_t i = 0;
    for (; i + 32 <= size; i += 32) {
        uint64_t w[4];
        memcpy(w, bytes + i, 32);
        a = nlr_hash_round(a, w[0]);
        b = nlr_hash_round(b, w[1]);
        c = nlr_hash_round(c, w[2]);
        d = nlr_hash_round(d, w[3]);
    }
    uint64_t h = nlr_rotl64(a, 1) + nlr_rotl64(b, 7) + nlr_rotl64(c, 12) + nlr_rotl64(d, 18) + (uint64_t)size;
    for (; i + 8 <= size; i += 8) {
        uint64_t w;
        memcpy(&w, bytes + i, 8);
        h ^= nlr_hash_round(0, w);
        h = nlr_rotl64(h, 27) * 0x9E3779B185EBCA87ULL + 0x85EBCA77C2B2AE63ULL;
    }
    for (; i < size; i++) {
        h ^= bytes[i] * 0x27D4EB2F165667C5ULL;
        h = nlr_rotl64(h, 11) * 0x9E3779B185EBCA87ULL;
    }
    h ^= h >> 33;
    h *= 0xC2B2AE3D27D4EB4FULL;
    h ^= h >> 29;
    h *= 0x165667B19E3779F9ULL;
    h ^= h >> 32;
    return h;
}

#ifdef __cplusplus
}
#endif

#endif /* NLR_HOST_H */
