import CLibretro
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The libretro entry points the host calls, resolved with `dlsym`.
struct CoreEntryPoints {
    let setEnvironment: retro_set_environment_fn
    let setVideoRefresh: retro_set_video_refresh_fn
    let setAudioSample: retro_set_audio_sample_fn
    let setAudioSampleBatch: retro_set_audio_sample_batch_fn
    let setInputPoll: retro_set_input_poll_fn
    let setInputState: retro_set_input_state_fn
    let initialize: retro_init_fn
    let deinitialize: retro_deinit_fn
    let apiVersion: retro_api_version_fn
    let getSystemInfo: retro_get_system_info_fn
    let getSystemAVInfo: retro_get_system_av_info_fn
    let setControllerPortDevice: retro_set_controller_port_device_fn
    let reset: retro_reset_fn
    let run: retro_run_fn
    let serializeSize: retro_serialize_size_fn
    let serialize: retro_serialize_fn
    let unserialize: retro_unserialize_fn
    let loadGame: retro_load_game_fn
    let unloadGame: retro_unload_game_fn
    let getMemoryData: retro_get_memory_data_fn
    let getMemorySize: retro_get_memory_size_fn

    /// Every symbol the host needs, in the order reported when some are missing.
    static let symbolNames = [
        "retro_set_environment", "retro_set_video_refresh", "retro_set_audio_sample",
        "retro_set_audio_sample_batch", "retro_set_input_poll", "retro_set_input_state", "retro_init",
        "retro_deinit", "retro_api_version", "retro_get_system_info", "retro_get_system_av_info",
        "retro_set_controller_port_device", "retro_reset", "retro_run", "retro_serialize_size",
        "retro_serialize", "retro_unserialize", "retro_load_game", "retro_unload_game",
        "retro_get_memory_data", "retro_get_memory_size",
    ]

    /// Resolves every entry point, or returns the names of the missing ones.
    static func resolve(_ handle: UnsafeMutableRawPointer) -> Result<CoreEntryPoints, MissingSymbols> {
        var found: [String: UnsafeMutableRawPointer] = [:]
        var missing: [String] = []
        for name in symbolNames {
            if let pointer = dlsym(handle, name) { found[name] = pointer } else { missing.append(name) }
        }
        guard missing.isEmpty else { return .failure(MissingSymbols(names: missing)) }
        func symbol<T>(_ name: String, as type: T.Type) -> T { unsafeBitCast(found[name]!, to: type) }
        return .success(CoreEntryPoints(
            setEnvironment: symbol("retro_set_environment", as: retro_set_environment_fn.self),
            setVideoRefresh: symbol("retro_set_video_refresh", as: retro_set_video_refresh_fn.self),
            setAudioSample: symbol("retro_set_audio_sample", as: retro_set_audio_sample_fn.self),
            setAudioSampleBatch: symbol("retro_set_audio_sample_batch", as: retro_set_audio_sample_batch_fn.self),
            setInputPoll: symbol("retro_set_input_poll", as: retro_set_input_poll_fn.self),
            setInputState: symbol("retro_set_input_state", as: retro_set_input_state_fn.self),
            initialize: symbol("retro_init", as: retro_init_fn.self),
            deinitialize: symbol("retro_deinit", as: retro_deinit_fn.self),
            apiVersion: symbol("retro_api_version", as: retro_api_version_fn.self),
            getSystemInfo: symbol("retro_get_system_info", as: retro_get_system_info_fn.self),
            getSystemAVInfo: symbol("retro_get_system_av_info", as: retro_get_system_av_info_fn.self),
            setControllerPortDevice: symbol("retro_set_controller_port_device",
                                            as: retro_set_controller_port_device_fn.self),
            reset: symbol("retro_reset", as: retro_reset_fn.self),
            run: symbol("retro_run", as: retro_run_fn.self),
            serializeSize: symbol("retro_serialize_size", as: retro_serialize_size_fn.self),
            serialize: symbol("retro_serialize", as: retro_serialize_fn.self),
            unserialize: symbol("retro_unserialize", as: retro_unserialize_fn.self),
            loadGame: symbol("retro_load_game", as: retro_load_game_fn.self),
            unloadGame: symbol("retro_unload_game", as: retro_unload_game_fn.self),
            getMemoryData: symbol("retro_get_memory_data", as: retro_get_memory_data_fn.self),
            getMemorySize: symbol("retro_get_memory_size", as: retro_get_memory_size_fn.self)
        ))
    }

    struct MissingSymbols: Error {
        let names: [String]
    }
}

/// Serialises the decision "load the file itself or a private copy" with the `dlopen` it leads to.
private let loaderLock = Mutex<Void>(())

/// A core's shared library, opened with `dlopen`.
///
/// A library's globals (and so a libretro core's whole emulator) exist once per loaded file, and
/// `dlopen` of a file already loaded returns the same instance. So when the file is already
/// resident in the process (another ``LibretroCore`` uses it, or an earlier one could not be
/// unloaded), the library is copied to a private temporary file first and that copy is loaded:
/// it is an independent instance with its own globals. The copy is deleted right after loading.
final class CoreLibrary {
    let handle: UnsafeMutableRawPointer
    let entryPoints: CoreEntryPoints
    /// The canonical path of the core file the caller named.
    let path: String
    /// Whether this instance was loaded from a private copy.
    let isPrivateCopy: Bool

    init(path requested: String) throws {
        var info = stat()
        guard stat(requested, &info) == 0 else { throw LibretroError.coreNotFound(path: requested) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw LibretroError.cannotLoadCore(path: requested, reason: "not a regular file")
        }
        let canonical = Self.canonicalPath(requested)
        let (handle, isCopy) = try loaderLock.withLock { _ -> (UnsafeMutableRawPointer, Bool) in
            if let resident = dlopen(canonical, RTLD_NOW | RTLD_NOLOAD) {
                dlclose(resident)
                return (try Self.openPrivateCopy(of: canonical), true)
            }
            guard let handle = dlopen(canonical, RTLD_NOW | RTLD_LOCAL) else {
                throw LibretroError.cannotLoadCore(path: requested, reason: Self.lastDynamicLoaderError())
            }
            return (handle, false)
        }
        switch CoreEntryPoints.resolve(handle) {
        case .success(let entryPoints):
            self.entryPoints = entryPoints
        case .failure(let missing):
            dlclose(handle)
            throw LibretroError.notALibretroCore(path: requested, missingSymbols: missing.names)
        }
        let version = entryPoints.apiVersion()
        guard version == RETRO_API_VERSION else {
            dlclose(handle)
            throw LibretroError.apiVersionMismatch(path: requested, core: UInt32(version),
                                                   host: UInt32(RETRO_API_VERSION))
        }
        self.handle = handle
        self.path = canonical
        self.isPrivateCopy = isCopy
    }

    /// Unloads the library (the loader may keep it resident if it cannot be unloaded).
    func close() {
        loaderLock.withLock { _ in _ = dlclose(handle) }
    }

    private static func canonicalPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func lastDynamicLoaderError() -> String {
        guard let message = dlerror() else { return "unknown dynamic loader error" }
        return String(cString: message)
    }

    /// Copies `path` into a fresh temporary directory, loads the copy, then deletes it.
    private static func openPrivateCopy(of path: String) throws -> UnsafeMutableRawPointer {
        let fileManager = FileManager.default
        let directory = fileManager.temporaryDirectory
            .appendingPathComponent("netplay-libretro-\(getpid())-\(UUID().uuidString)", isDirectory: true)
        let copy = directory.appendingPathComponent((path as NSString).lastPathComponent)
        do {
            try fileManager.createDirectory(at: directory, withIntermediateDirectories: true)
            try fileManager.copyItem(atPath: path, toPath: copy.path)
        } catch {
            try? fileManager.removeItem(at: directory)
            throw LibretroError.privateCopyFailed(path: path, reason: "\(error)")
        }
        defer { try? fileManager.removeItem(at: directory) }
        guard let handle = dlopen(copy.path, RTLD_NOW | RTLD_LOCAL) else {
            throw LibretroError.cannotLoadCore(path: path, reason: lastDynamicLoaderError())
        }
        return handle
    }
}
