import Foundation
import Libretro
import NetplayService
import NetplayTestSupport
import NetplayWire

/// Discovery, coordinator and one relay as real processes on free loopback ports sharing a
/// cluster secret, plus netplay-peer processes against them; all killed with the cluster.
final class CoreCluster: TestCluster, @unchecked Sendable {
    static let secret = String(repeating: "c3", count: 32)

    init() throws {
        var options = Options(secret: Self.secret)
        options.name = "core-e2e"
        options.coordinatorArguments = ["--password-cost", "minimum", "--relay-refresh-interval", "0.5"]
        try super.init(options)
    }
}

/// A core these tests need beyond ``LibretroFixtures``: one that cannot save states.
enum CoreTestEnvironment {
    /// A minimal libretro core whose `retro_serialize_size` is 0, compiled with `cc`.
    static func coreWithoutSerialization() throws -> String {
        try LibretroFixtures.cached("no-states") {
            let directory = try LibretroFixtures.scratchDirectory()
            let source = directory + "/nostates.c", output = directory + "/nostates_libretro.so"
            try Data(noStatesSource.utf8).write(to: URL(fileURLWithPath: source))
            try LibretroFixtures.runTool("cc", ["-shared", "-fPIC", "-o", output, source])
            return output
        }
    }

    private static let noStatesSource = #"""
    #include <stdbool.h>
    #include <stddef.h>
    #include <string.h>
    struct retro_system_info { const char *library_name, *library_version, *valid_extensions; bool need_fullpath, block_extract; };
    struct retro_system_av_info { unsigned w, h, mw, mh; float aspect; double fps, rate; };
    typedef bool (*env_fn)(unsigned, void *);
    void retro_set_environment(env_fn f) { (void)f; }
    void retro_set_video_refresh(void *f) { (void)f; }
    void retro_set_audio_sample(void *f) { (void)f; }
    void retro_set_audio_sample_batch(void *f) { (void)f; }
    void retro_set_input_poll(void *f) { (void)f; }
    void retro_set_input_state(void *f) { (void)f; }
    void retro_init(void) {}
    void retro_deinit(void) {}
    unsigned retro_api_version(void) { return 1; }
    void retro_get_system_info(struct retro_system_info *i) {
        memset(i, 0, sizeof *i); i->library_name = "NoStates"; i->library_version = "1"; i->valid_extensions = "nes";
    }
    void retro_get_system_av_info(struct retro_system_av_info *i) {
        memset(i, 0, sizeof *i); i->w = i->mw = 256; i->h = i->mh = 240; i->fps = 60; i->rate = 48000;
    }
    void retro_set_controller_port_device(unsigned p, unsigned d) { (void)p; (void)d; }
    void retro_reset(void) {}
    void retro_run(void) {}
    size_t retro_serialize_size(void) { return 0; }
    bool retro_serialize(void *d, size_t s) { (void)d; (void)s; return false; }
    bool retro_unserialize(const void *d, size_t s) { (void)d; (void)s; return false; }
    void retro_cheat_reset(void) {}
    void retro_cheat_set(unsigned i, bool e, const char *c) { (void)i; (void)e; (void)c; }
    bool retro_load_game(const void *g) { (void)g; return true; }
    bool retro_load_game_special(unsigned t, const void *g, size_t n) { (void)t; (void)g; (void)n; return false; }
    void retro_unload_game(void) {}
    unsigned retro_get_region(void) { return 0; }
    void *retro_get_memory_data(unsigned id) { (void)id; return NULL; }
    size_t retro_get_memory_size(unsigned id) { (void)id; return 0; }
    """#
}
