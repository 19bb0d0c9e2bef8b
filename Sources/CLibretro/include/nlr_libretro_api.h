/*
 * The parts of the libretro API (API version 1) the Netplay libretro host uses, declared from
 * the public API description: the structs a core and a frontend exchange, the constants they
 * agree on, and the types of the core's entry points (resolved with dlsym, never linked) and
 * of the frontend's callbacks. Only what the host needs is declared here.
 */
#ifndef NLR_LIBRETRO_API_H
#define NLR_LIBRETRO_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API version a frontend and a core must agree on. */
#define RETRO_API_VERSION 1u

/* Input devices (the low byte of a device id; the rest is a subclass). */
#define RETRO_DEVICE_TYPE_SHIFT 8u
#define RETRO_DEVICE_MASK ((1u << RETRO_DEVICE_TYPE_SHIFT) - 1u)
#define RETRO_DEVICE_NONE 0u
#define RETRO_DEVICE_JOYPAD 1u
/* A joypad with two analog sticks (and analog buttons). */
#define RETRO_DEVICE_ANALOG 5u
#define RETRO_DEVICE_INDEX_ANALOG_LEFT 0u
#define RETRO_DEVICE_INDEX_ANALOG_RIGHT 1u
#define RETRO_DEVICE_INDEX_ANALOG_BUTTON 2u
#define RETRO_DEVICE_ID_ANALOG_X 0u
#define RETRO_DEVICE_ID_ANALOG_Y 1u

/* Joypad buttons: the id passed to the input-state callback, and the bit in a button mask. */
#define RETRO_DEVICE_ID_JOYPAD_B 0u
#define RETRO_DEVICE_ID_JOYPAD_Y 1u
#define RETRO_DEVICE_ID_JOYPAD_SELECT 2u
#define RETRO_DEVICE_ID_JOYPAD_START 3u
#define RETRO_DEVICE_ID_JOYPAD_UP 4u
#define RETRO_DEVICE_ID_JOYPAD_DOWN 5u
#define RETRO_DEVICE_ID_JOYPAD_LEFT 6u
#define RETRO_DEVICE_ID_JOYPAD_RIGHT 7u
#define RETRO_DEVICE_ID_JOYPAD_A 8u
#define RETRO_DEVICE_ID_JOYPAD_X 9u
#define RETRO_DEVICE_ID_JOYPAD_L 10u
#define RETRO_DEVICE_ID_JOYPAD_R 11u
#define RETRO_DEVICE_ID_JOYPAD_L2 12u
#define RETRO_DEVICE_ID_JOYPAD_R2 13u
#define RETRO_DEVICE_ID_JOYPAD_L3 14u
#define RETRO_DEVICE_ID_JOYPAD_R3 15u
/* With input bitmasks, asks for every button of a pad at once. */
#define RETRO_DEVICE_ID_JOYPAD_MASK 256u

/* Memory regions for retro_get_memory_data / retro_get_memory_size. */
#define RETRO_MEMORY_SAVE_RAM 0u
#define RETRO_MEMORY_RTC 1u
#define RETRO_MEMORY_SYSTEM_RAM 2u
#define RETRO_MEMORY_VIDEO_RAM 3u

/* Environment commands the host answers or records. */
#define RETRO_ENVIRONMENT_EXPERIMENTAL 0x10000u
#define RETRO_ENVIRONMENT_SET_ROTATION 1u
#define RETRO_ENVIRONMENT_GET_OVERSCAN 2u
#define RETRO_ENVIRONMENT_GET_CAN_DUPE 3u
#define RETRO_ENVIRONMENT_SET_MESSAGE 6u
#define RETRO_ENVIRONMENT_SHUTDOWN 7u
#define RETRO_ENVIRONMENT_SET_PERFORMANCE_LEVEL 8u
#define RETRO_ENVIRONMENT_GET_SYSTEM_DIRECTORY 9u
#define RETRO_ENVIRONMENT_SET_PIXEL_FORMAT 10u
#define RETRO_ENVIRONMENT_SET_INPUT_DESCRIPTORS 11u
#define RETRO_ENVIRONMENT_SET_HW_RENDER 14u
#define RETRO_ENVIRONMENT_GET_VARIABLE 15u
#define RETRO_ENVIRONMENT_SET_VARIABLES 16u
#define RETRO_ENVIRONMENT_GET_VARIABLE_UPDATE 17u
#define RETRO_ENVIRONMENT_SET_SUPPORT_NO_GAME 18u
#define RETRO_ENVIRONMENT_GET_LIBRETRO_PATH 19u
#define RETRO_ENVIRONMENT_SET_FRAME_TIME_CALLBACK 21u
#define RETRO_ENVIRONMENT_SET_AUDIO_CALLBACK 22u
#define RETRO_ENVIRONMENT_GET_INPUT_DEVICE_CAPABILITIES 24u
#define RETRO_ENVIRONMENT_GET_LOG_INTERFACE 27u
#define RETRO_ENVIRONMENT_GET_CORE_ASSETS_DIRECTORY 30u
#define RETRO_ENVIRONMENT_GET_SAVE_DIRECTORY 31u
#define RETRO_ENVIRONMENT_SET_SYSTEM_AV_INFO 32u
#define RETRO_ENVIRONMENT_SET_SUBSYSTEM_INFO 34u
#define RETRO_ENVIRONMENT_SET_CONTROLLER_INFO 35u
#define RETRO_ENVIRONMENT_SET_MEMORY_MAPS (36u | RETRO_ENVIRONMENT_EXPERIMENTAL)
#define RETRO_ENVIRONMENT_SET_GEOMETRY 37u
#define RETRO_ENVIRONMENT_GET_LANGUAGE 39u
#define RETRO_ENVIRONMENT_SET_SUPPORT_ACHIEVEMENTS (42u | RETRO_ENVIRONMENT_EXPERIMENTAL)
#define RETRO_ENVIRONMENT_SET_SERIALIZATION_QUIRKS 44u
#define RETRO_ENVIRONMENT_GET_AUDIO_VIDEO_ENABLE (47u | RETRO_ENVIRONMENT_EXPERIMENTAL)
#define RETRO_ENVIRONMENT_GET_FASTFORWARDING (49u | RETRO_ENVIRONMENT_EXPERIMENTAL)
#define RETRO_ENVIRONMENT_GET_INPUT_BITMASKS (51u | RETRO_ENVIRONMENT_EXPERIMENTAL)
#define RETRO_ENVIRONMENT_GET_CORE_OPTIONS_VERSION 52u
#define RETRO_ENVIRONMENT_GET_MESSAGE_INTERFACE_VERSION 59u
#define RETRO_ENVIRONMENT_SET_MESSAGE_EXT 60u
#define RETRO_ENVIRONMENT_GET_INPUT_MAX_USERS 61u
#define RETRO_ENVIRONMENT_GET_SAVESTATE_CONTEXT (72u | RETRO_ENVIRONMENT_EXPERIMENTAL)

/* Serialization quirks a core may report with SET_SERIALIZATION_QUIRKS (a uint64_t mask). */
#define RETRO_SERIALIZATION_QUIRK_INCOMPLETE (1u << 0)
#define RETRO_SERIALIZATION_QUIRK_MUST_INITIALIZE (1u << 1)
#define RETRO_SERIALIZATION_QUIRK_CORE_VARIABLE_SIZE (1u << 2)
#define RETRO_SERIALIZATION_QUIRK_FRONT_VARIABLE_SIZE (1u << 3)
#define RETRO_SERIALIZATION_QUIRK_SINGLE_SESSION (1u << 4)
#define RETRO_SERIALIZATION_QUIRK_ENDIAN_DEPENDENT (1u << 5)
#define RETRO_SERIALIZATION_QUIRK_PLATFORM_DEPENDENT (1u << 6)

/* Answers to GET_SAVESTATE_CONTEXT: what a state will be used for. */
#define RETRO_SAVESTATE_CONTEXT_NORMAL 0
#define RETRO_SAVESTATE_CONTEXT_RUNAHEAD_SAME_INSTANCE 1
#define RETRO_SAVESTATE_CONTEXT_RUNAHEAD_SAME_BINARY 2
#define RETRO_SAVESTATE_CONTEXT_ROLLBACK_NETPLAY 3

/* Pixel formats for SET_PIXEL_FORMAT (an enum passed by pointer, int-sized). */
#define RETRO_PIXEL_FORMAT_0RGB1555 0
#define RETRO_PIXEL_FORMAT_XRGB8888 1
#define RETRO_PIXEL_FORMAT_RGB565 2

/* Log levels of the log interface. */
enum retro_log_level {
    RETRO_LOG_DEBUG = 0,
    RETRO_LOG_INFO = 1,
    RETRO_LOG_WARN = 2,
    RETRO_LOG_ERROR = 3,
    RETRO_LOG_DUMMY = 0x7fffffff
};

/* A core's description of itself (retro_get_system_info). Strings belong to the core. */
struct retro_system_info {
    const char *library_name;
    const char *library_version;
    const char *valid_extensions; /* '|'-separated, no dots */
    bool need_fullpath;           /* true: the core reads the file itself from `path` */
    bool block_extract;
};

/* The content handed to retro_load_game. */
struct retro_game_info {
    const char *path;
    const void *data;
    size_t size;
    const char *meta;
};

/* Video geometry and timing (retro_get_system_av_info). */
struct retro_game_geometry {
    unsigned base_width;
    unsigned base_height;
    unsigned max_width;
    unsigned max_height;
    float aspect_ratio;
};

struct retro_system_timing {
    double fps;
    double sample_rate;
};

struct retro_system_av_info {
    struct retro_game_geometry geometry;
    struct retro_system_timing timing;
};

/* A core option: SET_VARIABLES passes an array ended by a NULL key; GET_VARIABLE passes one. */
struct retro_variable {
    const char *key;
    const char *value;
};

/* An on-screen message (SET_MESSAGE). */
struct retro_message {
    const char *msg;
    unsigned frames;
};

/* The frontend's callbacks. */
typedef bool (*retro_environment_t)(unsigned cmd, void *data);
typedef void (*retro_video_refresh_t)(const void *data, unsigned width, unsigned height, size_t pitch);
typedef void (*retro_audio_sample_t)(int16_t left, int16_t right);
typedef size_t (*retro_audio_sample_batch_t)(const int16_t *data, size_t frames);
typedef void (*retro_input_poll_t)(void);
typedef int16_t (*retro_input_state_t)(unsigned port, unsigned device, unsigned index, unsigned id);
typedef void (*retro_log_printf_t)(enum retro_log_level level, const char *fmt, ...);

/* GET_LOG_INTERFACE fills this in. */
struct retro_log_callback {
    retro_log_printf_t log;
};

/* The core's entry points, as function-pointer types for dlsym. */
typedef void (*retro_set_environment_fn)(retro_environment_t);
typedef void (*retro_set_video_refresh_fn)(retro_video_refresh_t);
typedef void (*retro_set_audio_sample_fn)(retro_audio_sample_t);
typedef void (*retro_set_audio_sample_batch_fn)(retro_audio_sample_batch_t);
typedef void (*retro_set_input_poll_fn)(retro_input_poll_t);
typedef void (*retro_set_input_state_fn)(retro_input_state_t);
typedef void (*retro_init_fn)(void);
typedef void (*retro_deinit_fn)(void);
typedef unsigned (*retro_api_version_fn)(void);
typedef void (*retro_get_system_info_fn)(struct retro_system_info *info);
typedef void (*retro_get_system_av_info_fn)(struct retro_system_av_info *info);
typedef void (*retro_set_controller_port_device_fn)(unsigned port, unsigned device);
typedef void (*retro_reset_fn)(void);
typedef void (*retro_run_fn)(void);
typedef size_t (*retro_serialize_size_fn)(void);
typedef bool (*retro_serialize_fn)(void *data, size_t size);
typedef bool (*retro_unserialize_fn)(const void *data, size_t size);
typedef bool (*retro_load_game_fn)(const struct retro_game_info *game);
typedef void (*retro_unload_game_fn)(void);
typedef void *(*retro_get_memory_data_fn)(unsigned id);
typedef size_t (*retro_get_memory_size_fn)(unsigned id);

#ifdef __cplusplus
}
#endif

#endif /* NLR_LIBRETRO_API_H */
