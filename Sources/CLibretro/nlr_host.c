/* Per-slot libretro callbacks; see include/nlr_host.h. */
#include "nlr_host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static nlr_slot slots[NLR_MAX_SLOTS];

int nlr_slot_acquire(void) {
    for (int i = 0; i < NLR_MAX_SLOTS; i++) {
        int expected = 0;
        if (__atomic_compare_exchange_n(&slots[i].in_use, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            nlr_slot *slot = &slots[i];
            slot->context = NULL;
            slot->environment = NULL;
            slot->log = NULL;
            memset(slot->joypad, 0, sizeof slot->joypad);
            memset(slot->analog, 0, sizeof slot->analog);
            slot->av_enable = 3;
            slot->hidden_video_frames = 0;
            slot->video_frames = 0;
            slot->video_width = 0;
            slot->video_height = 0;
            slot->video_pitch = 0;
            slot->audio_frames = 0;
            slot->input_polls = 0;
            return i;
        }
    }
    return -1;
}

void nlr_slot_release(int slot) {
    if (slot < 0 || slot >= NLR_MAX_SLOTS) return;
    slots[slot].context = NULL;
    slots[slot].environment = NULL;
    slots[slot].log = NULL;
    __atomic_store_n(&slots[slot].in_use, 0, __ATOMIC_RELEASE);
}

nlr_slot *nlr_slot_at(int slot) { return &slots[slot]; }

static bool environment_impl(nlr_slot *slot, unsigned cmd, void *data) {
    return slot->environment ? slot->environment(slot->context, cmd, data) : false;
}

static void log_impl(nlr_slot *slot, enum retro_log_level level, const char *fmt, va_list args) {
    if (!slot->log || !fmt) return;
    char buffer[1024];
    va_list copy;
    va_copy(copy, args);
    int length = vsnprintf(buffer, sizeof buffer, fmt, copy);
    va_end(copy);
    if (length < 0) return;
    if ((size_t)length < sizeof buffer) {
        slot->log(slot->context, (int)level, buffer);
        return;
    }
    char *large = malloc((size_t)length + 1);
    if (!large) {
        slot->log(slot->context, (int)level, buffer);
        return;
    }
    vsnprintf(large, (size_t)length + 1, fmt, args);
    slot->log(slot->context, (int)level, large);
    free(large);
}

static void video_refresh_impl(nlr_slot *slot, const void *data, unsigned width, unsigned height, size_t pitch) {
    (void)data;
    slot->video_frames++;
    if (!(slot->av_enable & 1)) slot->hidden_video_frames++;
    slot->video_width = width;
    slot->video_height = height;
    slot->video_pitch = pitch;
}

#define NLR_SLOT_CALLBACKS(N)                                                                            \
    static bool environment_##N(unsigned cmd, void *data) { return environment_impl(&slots[N], cmd, data); } \
    static void log_##N(enum retro_log_level level, const char *fmt, ...) {                              \
        va_list args;                                                                                    \
        va_start(args, fmt);                                                                             \
        log_impl(&slots[N], level, fmt, args);                                                           \
        va_end(args);                                                                                    \
    }                                                                                                    \
    static void video_refresh_##N(const void *data, unsigned width, unsigned height, size_t pitch) {     \
        video_refresh_impl(&slots[N], data, width, height, pitch);                                       \
    }                                                                                                    \
    static void audio_sample_##N(int16_t left, int16_t right) {                                          \
        (void)left;                                                                                      \
        (void)right;                                                                                     \
        slots[N].audio_frames++;                                                                         \
    }                                                                                                    \
    static size_t audio_sample_batch_##N(const int16_t *data, size_t frames) {                           \
        (void)data;                                                                                      \
        slots[N].audio_frames += frames;                                                                 \
        return frames;                                                                                   \
    }                                                                                                    \
    static void input_poll_##N(void) { slots[N].input_polls++; }                                         \
    static int16_t input_state_##N(unsigned port, unsigned device, unsigned index, unsigned id) {        \
        return nlr_input_state(&slots[N], port, device, index, id);                                      \
    }

NLR_SLOT_CALLBACKS(0)
NLR_SLOT_CALLBACKS(1)
NLR_SLOT_CALLBACKS(2)
NLR_SLOT_CALLBACKS(3)
NLR_SLOT_CALLBACKS(4)
NLR_SLOT_CALLBACKS(5)
NLR_SLOT_CALLBACKS(6)
NLR_SLOT_CALLBACKS(7)

#define NLR_TABLE(name, type) \
    static const type name##_table[NLR_MAX_SLOTS] = {name##_0, name##_1, name##_2, name##_3, \
                                                     name##_4, name##_5, name##_6, name##_7}

NLR_TABLE(environment, retro_environment_t);
NLR_TABLE(log, retro_log_printf_t);
NLR_TABLE(video_refresh, retro_video_refresh_t);
NLR_TABLE(audio_sample, retro_audio_sample_t);
NLR_TABLE(audio_sample_batch, retro_audio_sample_batch_t);
NLR_TABLE(input_poll, retro_input_poll_t);
NLR_TABLE(input_state, retro_input_state_t);

_Static_assert(NLR_MAX_SLOTS == 8, "one NLR_SLOT_CALLBACKS line and table entry per slot");

static int valid(int slot) { return slot >= 0 && slot < NLR_MAX_SLOTS; }

retro_environment_t nlr_environment_callback(int slot) { return valid(slot) ? environment_table[slot] : NULL; }
retro_video_refresh_t nlr_video_refresh_callback(int slot) { return valid(slot) ? video_refresh_table[slot] : NULL; }
retro_audio_sample_t nlr_audio_sample_callback(int slot) { return valid(slot) ? audio_sample_table[slot] : NULL; }
retro_audio_sample_batch_t nlr_audio_sample_batch_callback(int slot) {
    return valid(slot) ? audio_sample_batch_table[slot] : NULL;
}
retro_input_poll_t nlr_input_poll_callback(int slot) { return valid(slot) ? input_poll_table[slot] : NULL; }
retro_input_state_t nlr_input_state_callback(int slot) { return valid(slot) ? input_state_table[slot] : NULL; }
retro_log_printf_t nlr_log_callback(int slot) { return valid(slot) ? log_table[slot] : NULL; }
