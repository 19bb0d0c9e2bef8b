import CLibretro
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A libretro core (an emulator in a shared library) loaded with its content and run headless.
///
/// ```swift
/// let core = try LibretroCore(corePath: "/usr/lib/x86_64-linux-gnu/libretro/nestopia_libretro.so",
///                             contentPath: "game.nes")
/// try core.setJoypad([.right, .a], port: 0)
/// core.run()                       // one frame
/// let state = try core.saveState() // retro_serialize
/// try core.loadState(state)        // retro_unserialize
/// ```
///
/// **Callbacks.** libretro callbacks are C function pointers without a context argument. Each
/// core claims one of ``maximumActiveCores`` callback slots (C functions bound to per-slot
/// state), so several cores can run in one process; a further one fails with
/// ``LibretroError/tooManyCores(limit:)``. Input, video and audio callbacks are answered in C
/// without calling into Swift; environment and log callbacks reach this core's own state.
///
/// **Instances.** A core's emulator lives in the library's globals, so two cores loaded from
/// the same file would share it. When the file is already loaded in the process, the host
/// loads a private copy of it instead (see ``isPrivateCopy``), an independent instance.
///
/// **Headless.** Video frames and audio samples are counted and dropped. Input comes from
/// ``setJoypad(_:port:)`` (`RETRO_DEVICE_JOYPAD` on ports `0 ..< portCount`, answered per button
/// or as a bitmask) and, with an analog input layout, ``setAnalog(_:port:)``
/// (`RETRO_DEVICE_ANALOG`).
///
/// A core is not thread-safe: use it from one thread (or one actor) at a time. Close it with
/// ``close()`` or let it go; either unloads the content and the library.
public final class LibretroCore {
    /// Cores that may be loaded at once in one process (callback slots).
    public static let maximumActiveCores = Int(NLR_MAX_SLOTS)
    /// Controller ports the host can drive.
    public static let maximumPorts = Int(NLR_MAX_PORTS)
    /// The libretro API version this host implements.
    public static let apiVersion = UInt32(RETRO_API_VERSION)
    /// The largest state a core may report (`retro_serialize_size`): a size of `(size_t)-1`, or
    /// one past what memory holds, is a broken core, refused instead of trapping in the allocation.
    public static let maximumStateSize = 256 << 20

    /// How to start a core.
    public struct Options: Sendable {
        /// Controller ports with a joypad, 1 ... ``LibretroCore/maximumPorts``.
        public var portCount: Int
        /// The directory answered for `GET_SYSTEM_DIRECTORY` (BIOS files, databases); nil: a
        /// private empty temporary directory, removed on close.
        public var systemDirectory: String?
        /// The directory answered for `GET_SAVE_DIRECTORY`; nil: a private temporary directory.
        public var saveDirectory: String?
        /// Core option values by key; each must be one of the choices the core declares.
        /// Every peer of a match must use the same values.
        public var variables: [String: String]
        /// Receives every line the core logs (the core's thread, during its calls).
        public var logHandler: (@Sendable (LibretroLogLevel, String) -> Void)?
        /// The device plugged into every port: a joypad, or a joypad with two analog sticks
        /// (``LibretroInputLayout/joypadAnalog``).
        public var inputLayout: LibretroInputLayout = .joypad

        /// Options with defaults: two joypads, private directories, the core's default options.
        public init(portCount: Int = 2, systemDirectory: String? = nil, saveDirectory: String? = nil,
                    variables: [String: String] = [:],
                    logHandler: (@Sendable (LibretroLogLevel, String) -> Void)? = nil) {
            self.portCount = portCount
            self.systemDirectory = systemDirectory
            self.saveDirectory = saveDirectory
            self.variables = variables
            self.logHandler = logHandler
        }
    }

    /// The core file (canonical path).
    public let corePath: String
    /// The content file (absolute path).
    public let contentPath: String
    /// What the core says about itself.
    public let systemInfo: LibretroSystemInfo
    /// Joypad ports driven by ``setJoypad(_:port:)``.
    public let portCount: Int
    /// Whether this instance runs from a private copy of the core file (the file was already
    /// loaded in this process).
    public let isPrivateCopy: Bool
    /// Bytes of a saved state (`retro_serialize_size`).
    public internal(set) var stateSize: Int
    /// Frames run since the content was loaded.
    public private(set) var framesRun = 0

    private let library: CoreLibrary
    let entry: CoreEntryPoints
    let environment: HostEnvironment
    private let slot: Int32
    private let slotState: UnsafeMutablePointer<nlr_slot>
    private let baseAVInfo: LibretroAVInfo
    /// The content bytes handed to the core (when it does not read the file itself), kept
    /// until the content is unloaded.
    private let contentBuffer: UnsafeMutableRawBufferPointer?
    private let temporaryDirectory: String?
    private(set) var closed = false
    /// The serialization of the current state, when nothing ran or loaded since it was made:
    /// a save and a checksum of the same frame share one `retro_serialize`.
    var current: [UInt8]?

    /// Loads the core at `corePath`, starts it and loads `contentPath`.
    ///
    /// - Throws: ``LibretroError`` when the core is missing, is not a libretro core, speaks
    ///   another API version or cannot save states; when every callback slot is taken; when the
    ///   content is missing, unreadable or rejected; when an option is invalid.
    public init(corePath: String, contentPath: String, options: Options = Options()) throws {
        guard (1 ... Self.maximumPorts).contains(options.portCount) else {
            throw LibretroError.invalidOptions("portCount must be 1 ... \(Self.maximumPorts)")
        }
        let library = try CoreLibrary(path: corePath)
        let entry = library.entryPoints
        let slot = nlr_slot_acquire()
        guard slot >= 0 else {
            library.close()
            throw LibretroError.tooManyCores(limit: Self.maximumActiveCores)
        }
        var temporaryDirectory: String?
        var started = false
        var contentBuffer: UnsafeMutableRawBufferPointer?
        var loaded = false
        func tearDown() {
            if loaded { entry.unloadGame() }
            if started { entry.deinitialize() }
            nlr_slot_release(slot)
            library.close()
            contentBuffer?.deallocate()
            if let temporaryDirectory { try? FileManager.default.removeItem(atPath: temporaryDirectory) }
        }

        let environment: HostEnvironment
        let info: LibretroSystemInfo
        let content: String
        do {
            var systemDirectory = options.systemDirectory
            var saveDirectory = options.saveDirectory
            if systemDirectory == nil || saveDirectory == nil {
                let base = try Self.makeTemporaryDirectory()
                temporaryDirectory = base
                systemDirectory = systemDirectory ?? base + "/system"
                saveDirectory = saveDirectory ?? base + "/saves"
                try FileManager.default.createDirectory(atPath: base + "/system", withIntermediateDirectories: true)
                try FileManager.default.createDirectory(atPath: base + "/saves", withIntermediateDirectories: true)
            }
            environment = HostEnvironment(slot: slot, corePath: library.path, systemDirectory: systemDirectory!,
                                          saveDirectory: saveDirectory!, portCount: options.portCount,
                                          overrides: options.variables, logHandler: options.logHandler)
            environment.install()
            entry.setEnvironment(nlr_environment_callback(slot))
            entry.initialize()
            started = true
            entry.setVideoRefresh(nlr_video_refresh_callback(slot))
            entry.setAudioSample(nlr_audio_sample_callback(slot))
            entry.setAudioSampleBatch(nlr_audio_sample_batch_callback(slot))
            entry.setInputPoll(nlr_input_poll_callback(slot))
            entry.setInputState(nlr_input_state_callback(slot))

            var raw = retro_system_info()
            entry.getSystemInfo(&raw)
            info = LibretroSystemInfo(raw)

            content = Self.absolutePath(contentPath)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: content, isDirectory: &isDirectory), !isDirectory.boolValue
            else { throw LibretroError.contentNotFound(path: contentPath) }
            if !info.needsFullPath {
                contentBuffer = try Self.readContent(content)
            }
            // The path outlives the call: a core may keep `game->path` (RetroArch keeps it for the
            // session), and a copy freed on return would be read after it was freed.
            var game = retro_game_info(path: environment.ownedCString(content),
                                       data: contentBuffer.map { UnsafeRawPointer($0.baseAddress) } ?? nil,
                                       size: contentBuffer?.count ?? 0, meta: nil)
            let accepted = entry.loadGame(&game)
            guard accepted else {
                let lines = environment.recentLog.filter { $0.level >= .warning }.suffix(4).map(\.message)
                throw LibretroError.contentRejected(path: contentPath, core: info.libraryName, coreLog: Array(lines))
            }
            loaded = true
            if !environment.rejectedOverrides.isEmpty {
                throw LibretroError.invalidOptions("core options with invalid values: "
                    + environment.rejectedOverrides.joined(separator: ", "))
            }
            let declared = Set(environment.variables.map(\.key))
            let unknown = options.variables.keys.filter { !declared.contains($0) }.sorted()
            if !unknown.isEmpty {
                throw LibretroError.invalidOptions("\(info.libraryName) has no core option "
                    + unknown.joined(separator: ", "))
            }
        } catch {
            tearDown()
            throw error
        }

        var avInfo = retro_system_av_info()
        entry.getSystemAVInfo(&avInfo)
        for port in 0 ..< options.portCount {
            entry.setControllerPortDevice(UInt32(port), options.inputLayout.device)
        }

        // A core that needs a frame before it can save states (its size is 0, or its first
        // retro_serialize fails, as libretro.h allows) gets one here, identically on every peer,
        // so frame 0 is the same everywhere.
        func serialized() -> (size: Int, bytes: [UInt8]?) {
            let size = entry.serializeSize()
            guard (1 ... Self.maximumStateSize).contains(size) else { return (size, nil) }
            var bytes = [UInt8](repeating: 0, count: size)
            return (size, bytes.withUnsafeMutableBytes { entry.serialize($0.baseAddress, size) } ? bytes : nil)
        }
        var (size, probe) = serialized()
        if probe == nil && environment.quirks.contains(.mustInitialize) {
            entry.run()
            (size, probe) = serialized()
        }
        // A core whose states cannot serve netplay says so with its quirks: refused with the
        // reason, not played into a desync (or a crash in the core loading another's state).
        if let problem = environment.quirks.netplayProblem {
            tearDown()
            throw LibretroError.serializationUnsupported(core: info.libraryName, reason: problem)
        }
        guard let probe else {
            tearDown()
            let reason = size <= 0 ? "retro_serialize_size is \(size)"
                : size > Self.maximumStateSize ? "retro_serialize_size is \(size), over \(Self.maximumStateSize)"
                : "retro_serialize of \(size) bytes failed"
            throw LibretroError.serializationUnsupported(core: info.libraryName, reason: reason)
        }

        self.library = library
        self.entry = entry
        self.slot = slot
        self.slotState = nlr_slot_at(slot)
        self.environment = environment
        self.systemInfo = info
        self.corePath = library.path
        self.contentPath = content
        self.portCount = options.portCount
        self.isPrivateCopy = library.isPrivateCopy
        self.baseAVInfo = LibretroAVInfo(avInfo)
        self.contentBuffer = contentBuffer
        self.temporaryDirectory = temporaryDirectory
        self.stateSize = size
        self.current = probe
    }

    deinit { close() }

    /// Unloads the content, deinitialises the core, frees its callback slot and unloads the
    /// library. The core cannot be used afterwards. Called by `deinit` if needed.
    public func close() {
        guard !closed else { return }
        closed = true
        entry.unloadGame()
        entry.deinitialize()
        nlr_slot_release(slot)
        library.close()
        contentBuffer?.deallocate()
        if let temporaryDirectory { try? FileManager.default.removeItem(atPath: temporaryDirectory) }
        current = nil
    }

    /// Whether ``close()`` was called.
    public var isClosed: Bool { closed }

    // MARK: - Running

    /// Sets the buttons held on `port` from the next ``run()`` on.
    public func setJoypad(_ buttons: JoypadButtons, port: Int) throws {
        try checkOpen()
        guard port >= 0 && port < portCount else { throw LibretroError.invalidPort(port, portCount: portCount) }
        nlr_slot_set_joypad(slotState, UInt32(port), buttons.rawValue)
    }

    /// Sets a port's buttons without the range check (`port` must be in `0 ..< portCount`).
    @usableFromInline
    func setJoypadUnchecked(_ mask: UInt16, port: Int) {
        nlr_slot_set_joypad(slotState, UInt32(truncatingIfNeeded: port), mask)
    }

    /// Sets the analog sticks on `port` from the next ``run()`` on.
    public func setAnalog(_ sticks: AnalogSticks, port: Int) throws {
        try checkOpen()
        guard port >= 0 && port < portCount else { throw LibretroError.invalidPort(port, portCount: portCount) }
        setAnalogUnchecked(sticks, port: port)
    }

    /// Sets a port's sticks without the range check (`port` must be in `0 ..< portCount`).
    @usableFromInline
    func setAnalogUnchecked(_ sticks: AnalogSticks, port: Int) {
        nlr_slot_set_analog(slotState, UInt32(truncatingIfNeeded: port), sticks.leftX, sticks.leftY,
                            sticks.rightX, sticks.rightY)
    }

    /// The analog sticks on `port`, as the core reads them (`RETRO_DEVICE_ANALOG`).
    public func analog(port: Int) -> AnalogSticks {
        guard port >= 0 && port < portCount else { return AnalogSticks() }
        func axis(_ index: UInt32, _ id: UInt32) -> Int16 {
            nlr_input_state(slotState, UInt32(port), RETRO_DEVICE_ANALOG, index, id)
        }
        return AnalogSticks(leftX: axis(RETRO_DEVICE_INDEX_ANALOG_LEFT, RETRO_DEVICE_ID_ANALOG_X),
                            leftY: axis(RETRO_DEVICE_INDEX_ANALOG_LEFT, RETRO_DEVICE_ID_ANALOG_Y),
                            rightX: axis(RETRO_DEVICE_INDEX_ANALOG_RIGHT, RETRO_DEVICE_ID_ANALOG_X),
                            rightY: axis(RETRO_DEVICE_INDEX_ANALOG_RIGHT, RETRO_DEVICE_ID_ANALOG_Y))
    }

    /// Whether the frontend presents the next frames' video and audio; the core learns it through
    /// `RETRO_ENVIRONMENT_GET_AUDIO_VIDEO_ENABLE` and may skip work it need not do. Cleared while
    /// a rollback re-simulates frames that were shown already (``LibretroGame`` does it from
    /// `FrameInputs.isResimulating`). A core's state must not depend on it.
    public var presentsOutput: Bool {
        get { slotState.pointee.av_enable != 0 }
        set {
            precondition(!closed, "LibretroCore used after close()")
            slotState.pointee.av_enable = newValue ? 3 : 0
        }
    }

    /// Throws once the core is closed: its callback slot may be another core's by then (the
    /// next core opened takes the lowest free one), whose inputs a stale reference changed.
    func checkOpen() throws {
        guard !closed else { throw LibretroError.invalidOptions("the core \(systemInfo.libraryName) is closed") }
    }

    /// The buttons currently held on `port`.
    public func joypad(port: Int) -> JoypadButtons {
        guard port >= 0 && port < portCount else { return [] }
        return JoypadButtons(rawValue: nlr_joypad_state(slotState, UInt32(port), RETRO_DEVICE_JOYPAD, 0,
                                                        RETRO_DEVICE_ID_JOYPAD_MASK).bitPatternUInt16)
    }

    /// Runs one frame (`retro_run`) with the buttons set by ``setJoypad(_:port:)``.
    public func run() {
        precondition(!closed, "LibretroCore used after close()")
        current = nil
        entry.run()
        framesRun += 1
    }

    /// Resets the emulated system (`retro_reset`), like its reset button.
    public func reset() {
        precondition(!closed, "LibretroCore used after close()")
        current = nil
        entry.reset()
    }

    // MARK: - Inspection

    /// The current video geometry and timing (updated when the core changes them).
    public var avInfo: LibretroAVInfo {
        guard let update = environment.avInfoUpdate else { return baseAVInfo }
        var info = LibretroAVInfo(update)
        if update.timing.fps == 0 {
            info.framesPerSecond = baseAVInfo.framesPerSecond
            info.sampleRate = baseAVInfo.sampleRate
        }
        return info
    }

    /// A copy of a memory region, or nil when the core does not expose it.
    public func memory(_ region: LibretroMemoryRegion) -> [UInt8]? {
        precondition(!closed, "LibretroCore used after close()")
        let size = entry.getMemorySize(region.rawValue)
        guard size > 0, let data = entry.getMemoryData(region.rawValue) else { return nil }
        return Array(UnsafeRawBufferPointer(start: data, count: size))
    }

    /// The serialization quirks the core reported.
    public var serializationQuirks: LibretroSerializationQuirks { environment.quirks }

    /// The core options the core declared, with the values it gets.
    public var variables: [LibretroVariable] { environment.variables }

    /// Changes a core option; the core sees it at its next check (usually the next frame).
    /// Returns false for an unknown key or a value outside the option's choices. Every peer
    /// must change it at the same frame.
    @discardableResult
    public func setVariable(_ key: String, to value: String) -> Bool {
        environment.setVariable(key, to: value)
    }

    /// The pixel format the core chose (`RETRO_PIXEL_FORMAT_*`).
    public var pixelFormat: Int32 { environment.pixelFormat }

    /// The core's most recent log lines (at most 64).
    public var recentLog: [LibretroLogLine] { environment.recentLog }

    /// Environment commands the core asked for and the host does not support.
    public var unsupportedEnvironmentCommands: Set<UInt32> { environment.unansweredCommands }

    /// Whether the core asked to shut down (`RETRO_ENVIRONMENT_SHUTDOWN`).
    public var shutdownRequested: Bool { environment.shutdownRequested }

    /// Video frames the core delivered (duplicates included).
    public var videoFrameCount: Int { Int(clamping: slotState.pointee.video_frames) }

    /// Video frames the core delivered while ``presentsOutput`` was off (re-simulated frames a
    /// frontend does not show).
    public var hiddenVideoFrameCount: Int { Int(clamping: slotState.pointee.hidden_video_frames) }

    /// The size of the last video frame, in pixels.
    public var lastVideoSize: (width: Int, height: Int) {
        (Int(slotState.pointee.video_width), Int(slotState.pointee.video_height))
    }

    /// Stereo audio frames the core delivered.
    public var audioFrameCount: Int { Int(clamping: slotState.pointee.audio_frames) }

    /// How often the core polled input.
    public var inputPollCount: Int { Int(clamping: slotState.pointee.input_polls) }

    // MARK: - Helpers

    /// The path of an installed core called `name` (e.g. "nestopia" finds
    /// `nestopia_libretro.so`), searched in `$LIBRETRO_CORE_DIR`, Debian's multiarch directory,
    /// /usr/lib/libretro, /usr/local/lib/libretro and RetroArch's user core directory.
    public static func installedCore(named name: String) -> String? {
        #if os(macOS)
        let file = "\(name)_libretro.dylib"
        #else
        let file = "\(name)_libretro.so"
        #endif
        var directories: [String] = []
        if let custom = ProcessInfo.processInfo.environment["LIBRETRO_CORE_DIR"] { directories.append(custom) }
        #if arch(x86_64)
        directories.append("/usr/lib/x86_64-linux-gnu/libretro")
        #elseif arch(arm64)
        directories.append("/usr/lib/aarch64-linux-gnu/libretro")
        #endif
        directories += ["/usr/lib/libretro", "/usr/local/lib/libretro"]
        if let home = ProcessInfo.processInfo.environment["HOME"] { directories.append(home + "/.config/retroarch/cores") }
        return directories.map { $0 + "/" + file }.first { FileManager.default.isReadableFile(atPath: $0) }
    }

    private static func absolutePath(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    private static func makeTemporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("netplay-libretro-\(getpid())-\(UUID().uuidString)", isDirectory: true).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private static func readContent(_ path: String) throws -> UnsafeMutableRawBufferPointer {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw LibretroError.contentUnreadable(path: path, reason: "\(error)")
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(data.count, 1), alignment: 16)
        data.copyBytes(to: buffer.bindMemory(to: UInt8.self), count: data.count)
        return UnsafeMutableRawBufferPointer(rebasing: buffer[0 ..< data.count])
    }
}

extension LibretroSystemInfo {
    init(_ raw: retro_system_info) {
        libraryName = raw.library_name.map { String(cString: $0) } ?? "unnamed core"
        libraryVersion = (raw.library_version.map { String(cString: $0) } ?? "").trimmingCharacters(in: .whitespaces)
        validExtensions = (raw.valid_extensions.map { String(cString: $0) } ?? "")
            .split(separator: "|").map(String.init)
        needsFullPath = raw.need_fullpath
        blocksExtraction = raw.block_extract
    }
}

extension Int16 {
    var bitPatternUInt16: UInt16 { UInt16(bitPattern: self) }
}
