import Foundation
import Libretro
import NetplayTestSupport

/// A tiny libretro core written for these tests, compiled with `cc` at test time in variants
/// that break one rule each (API version, serialization, missing entry points). Its 64-byte
/// state folds both ports' input bitmasks in every frame.
enum FakeCore {
    /// What to build.
    struct Variant: Hashable {
        var apiVersion = 1
        var stateSize = 64
        var omitRun = false
        var needFullPath = false
        /// Serialization quirks the core reports from `retro_load_game` (0: it reports none).
        var quirks: UInt64 = 0

        var flags: [String] {
            var flags = ["-DFAKE_API_VERSION=\(apiVersion)", "-DFAKE_STATE_SIZE=\(stateSize)"]
            if omitRun { flags.append("-DFAKE_OMIT_RUN") }
            if needFullPath { flags.append("-DFAKE_NEED_FULLPATH") }
            if quirks != 0 { flags.append("-DFAKE_QUIRKS=\(quirks)ULL") }
            return flags
        }

        var fileName: String { "fake_" + flags.joined().filter { $0.isLetter || $0.isNumber } + "_libretro.so" }
    }

    /// Offsets in the fake core's state (and system RAM).
    enum Layout {
        static let frames = 0          // UInt32, runs so far
        static let port0 = 4           // UInt16, the last mask read on port 0
        static let port1 = 6           // UInt16, on port 1
        static let hash = 8            // UInt32, mix of every mask so far
        static let contentSize = 12    // UInt32, bytes of content data handed over (0: path only)
        static let pathLength = 16     // UInt32, length of the content path
        static let mode = 20           // UInt8, 1 when the option fake_mode is "beta"
        static let perButtonAgrees = 21 // UInt8, 1 while per-button queries match the bitmask
        static let sticks0 = 24        // 4 x Int16, port 0's analog sticks (lx, ly, rx, ry) last read
        static let sticks1 = 32        // 4 x Int16, port 1's
    }

    /// Offsets in the fake core's side record, outside its state (served as save RAM).
    enum Side {
        static let lastAVEnable = 0    // UInt32, GET_AUDIO_VIDEO_ENABLE's last answer (0xFF: refused)
        static let hiddenRuns = 4      // UInt32, runs told video is not presented
    }

    static let source = #"""
    #include <stdbool.h>
    #include <stddef.h>
    #include <stdint.h>
    #include <string.h>

    struct sys_info { const char *name, *version, *extensions; bool need_fullpath, block_extract; };
    struct game_info { const char *path; const void *data; size_t size; const char *meta; };
    struct av_info { unsigned bw, bh, mw, mh; float aspect; double fps, rate; };
    struct variable { const char *key, *value; };
    typedef bool (*env_t)(unsigned, void *);
    typedef void (*video_t)(const void *, unsigned, unsigned, size_t);
    typedef void (*sample_t)(int16_t, int16_t);
    typedef size_t (*batch_t)(const int16_t *, size_t);
    typedef void (*poll_t)(void);
    typedef int16_t (*input_t)(unsigned, unsigned, unsigned, unsigned);
    typedef void (*log_t)(int, const char *, ...);

    static env_t env; static video_t video; static batch_t batch; static poll_t poll; static input_t input;
    static log_t logf_cb;
    static unsigned char state[64];
    static unsigned char side[8];
    static uint32_t frames, hash = 2166136261u;

    static void put16(int at, uint16_t v) { memcpy(state + at, &v, 2); }
    static void put32(int at, uint32_t v) { memcpy(state + at, &v, 4); }

    unsigned retro_api_version(void) { return FAKE_API_VERSION; }
    void retro_set_environment(env_t cb) {
        static const struct variable vars[] = { { "fake_mode", "Mode; alpha|beta" }, { NULL, NULL } };
        env = cb;
        env(16, (void *)vars);
    }
    void retro_set_video_refresh(video_t cb) { video = cb; }
    void retro_set_audio_sample(sample_t cb) { (void)cb; }
    void retro_set_audio_sample_batch(batch_t cb) { batch = cb; }
    void retro_set_input_poll(poll_t cb) { poll = cb; }
    void retro_set_input_state(input_t cb) { input = cb; }
    void retro_init(void) {
        struct { log_t log; } log_interface = { 0 };
        if (env(27, &log_interface)) logf_cb = log_interface.log;
        memset(state, 0, sizeof state);
        memset(side, 0, sizeof side);
        frames = 0;
        hash = 2166136261u;
        put32(8, hash);
    }
    void retro_deinit(void) { if (logf_cb) logf_cb(1, "fake core: deinit after %u frames", frames); }
    void retro_get_system_info(struct sys_info *info) {
        info->name = "FakeCore"; info->version = "1"; info->extensions = "fake|bin";
    #ifdef FAKE_NEED_FULLPATH
        info->need_fullpath = true;
    #else
        info->need_fullpath = false;
    #endif
        info->block_extract = false;
    }
    void retro_get_system_av_info(struct av_info *info) {
        info->bw = 4; info->bh = 4; info->mw = 4; info->mh = 4; info->aspect = 1; info->fps = 60; info->rate = 48000;
    }
    void retro_set_controller_port_device(unsigned port, unsigned device) { (void)port; (void)device; }
    void retro_reset(void) { frames = 0; }
    #ifndef FAKE_OMIT_RUN
    void retro_run(void) {
        static const int16_t samples[4] = { 0, 0, 0, 0 };
        static const uint32_t pixels[16];
        poll();
        uint16_t m0 = (uint16_t)input(0, 1, 0, 256), m1 = (uint16_t)input(1, 1, 0, 256);
        for (unsigned port = 0; port < 2; port++) {
            for (unsigned axis = 0; axis < 4; axis++) {
                int16_t value = input(port, 5, axis / 2, axis % 2);
                memcpy(state + 24 + port * 8 + axis * 2, &value, 2);
                hash = (hash ^ (uint16_t)value) * 16777619u;
            }
        }
        int av = 0;
        uint32_t answer = env(47 | 0x10000, &av) ? (uint32_t)av : 0xFFu;
        memcpy(side, &answer, 4);
        if (answer != 0xFFu && !(answer & 1)) {
            uint32_t hidden;
            memcpy(&hidden, side + 4, 4);
            hidden++;
            memcpy(side + 4, &hidden, 4);
        }
        unsigned agree = 1;
        for (unsigned id = 0; id < 16; id++) {
            if ((unsigned)input(0, 1, 0, id) != ((m0 >> id) & 1u)) agree = 0;
            if ((unsigned)input(1, 1, 0, id) != ((m1 >> id) & 1u)) agree = 0;
        }
        frames++;
        hash = (hash ^ m0) * 16777619u;
        hash = (hash ^ ((uint32_t)m1 << 16)) * 16777619u;
        put32(0, frames); put16(4, m0); put16(6, m1); put32(8, hash);
        state[21] = (unsigned char)agree;
        video(pixels, 4, 4, 16);
        batch(samples, 2);
    }
    #endif
    size_t retro_serialize_size(void) { return FAKE_STATE_SIZE; }
    bool retro_serialize(void *data, size_t size) {
        if (size < sizeof state || FAKE_STATE_SIZE == 0) return false;
        memcpy(data, state, sizeof state);
        return true;
    }
    bool retro_unserialize(const void *data, size_t size) {
        if (size != sizeof state) return false;
        memcpy(state, data, sizeof state);
        memcpy(&frames, state, 4);
        memcpy(&hash, state + 8, 4);
        return true;
    }
    bool retro_load_game(const struct game_info *game) {
        if (!game || !game->path) return false;
        if (game->data && game->size >= 4 && memcmp(game->data, "BAD!", 4) == 0) {
            if (logf_cb) logf_cb(3, "fake core: content %s is marked bad", game->path);
            return false;
        }
        put32(12, (uint32_t)(game->data ? game->size : 0));
        put32(16, (uint32_t)strlen(game->path));
        struct variable mode = { "fake_mode", NULL };
        state[20] = env(15, &mode) && mode.value && strcmp(mode.value, "beta") == 0;
    #ifdef FAKE_QUIRKS
        unsigned long long quirks = FAKE_QUIRKS;
        env(44, &quirks);
    #endif
        return true;
    }
    void retro_unload_game(void) {}
    void *retro_get_memory_data(unsigned id) { return id == 2 ? state : id == 0 ? side : NULL; }
    size_t retro_get_memory_size(unsigned id) { return id == 2 ? sizeof state : id == 0 ? sizeof side : 0; }
    """#

    /// Builds (once per variant and process) and returns the core's path.
    static func path(_ variant: Variant = Variant()) throws -> String {
        try LibretroFixtures.cached("fake-core:\(variant.flags)") {
            let directory = try LibretroFixtures.scratchDirectory()
            let sourcePath = directory + "/fake_core.c"
            try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
            let output = directory + "/" + variant.fileName
            try LibretroFixtures.runTool("cc", ["-shared", "-fPIC", "-O1", "-o", output, sourcePath] + variant.flags)
            return output
        }
    }

    /// A content file for the fake core (`bad` content is rejected by it).
    static func content(bad: Bool = false) throws -> String {
        try LibretroFixtures.cached("fake-content:\(bad)") {
            let path = try LibretroFixtures.scratchDirectory() + (bad ? "/bad.fake" : "/good.fake")
            try Data((bad ? "BAD!" : "GOOD content").utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    static func uint16(_ bytes: [UInt8], _ offset: Int) -> UInt16 {
        UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    static func uint32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        (0 ..< 4).reduce(UInt32(0)) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }
}
