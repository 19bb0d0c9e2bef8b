import CLibretro
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Everything the environment and log callbacks of one core touch. It is the context pointer
/// of the core's callback slot, owned by its ``LibretroCore``, and lives until the core is
/// deinitialised, so callbacks during `retro_deinit` still find it.
final class HostEnvironment {
    /// C strings handed to the core; they stay valid until this object goes away.
    private var ownedStrings: [UnsafeMutablePointer<CChar>] = []
    private let corePathString: UnsafeMutablePointer<CChar>
    private let systemDirectoryString: UnsafeMutablePointer<CChar>
    private let saveDirectoryString: UnsafeMutablePointer<CChar>
    let slot: Int32
    let portCount: Int
    let logHandler: (@Sendable (LibretroLogLevel, String) -> Void)?

    /// Declared variables in declaration order, with the C string answered for each.
    private(set) var variables: [LibretroVariable] = []
    private var variableIndex: [String: Int] = [:]
    private var variableValues: [String: UnsafeMutablePointer<CChar>] = [:]
    private var variablesUpdated = false
    let overrides: [String: String]
    /// Overrides whose value is not one of the option's choices.
    private(set) var rejectedOverrides: [String] = []

    private(set) var pixelFormat: Int32 = RETRO_PIXEL_FORMAT_0RGB1555
    private(set) var quirks = LibretroSerializationQuirks()
    private(set) var avInfoUpdate: retro_system_av_info?
    private(set) var shutdownRequested = false
    /// Commands the host answered with "unsupported".
    private(set) var unansweredCommands: Set<UInt32> = []
    /// The most recent log lines (at most ``logCapacity``). Behind a lock: a threaded core logs
    /// from its own threads while the frontend's thread is inside `retro_run`, logging too.
    var recentLog: [LibretroLogLine] { recentLogLines.withLock { $0 } }
    private let recentLogLines = Mutex<[LibretroLogLine]>([])
    static let logCapacity = 64

    init(slot: Int32, corePath: String, systemDirectory: String, saveDirectory: String, portCount: Int,
         overrides: [String: String], logHandler: (@Sendable (LibretroLogLevel, String) -> Void)?) {
        self.slot = slot
        self.portCount = portCount
        self.overrides = overrides
        self.logHandler = logHandler
        corePathString = strdup(corePath)
        systemDirectoryString = strdup(systemDirectory)
        saveDirectoryString = strdup(saveDirectory)
    }

    deinit {
        free(corePathString)
        free(systemDirectoryString)
        free(saveDirectoryString)
        for string in ownedStrings { free(string) }
    }

    // MARK: - Log

    func log(level: Int32, message: UnsafePointer<CChar>) {
        var text = String(cString: message)
        while text.last == "\n" || text.last == "\r" { text.removeLast() }
        let line = LibretroLogLine(level: LibretroLogLevel(rawValue: Int(level)) ?? .info, message: text)
        recentLogLines.withLock { lines in
            if lines.count == Self.logCapacity { lines.removeFirst() }
            lines.append(line)
        }
        logHandler?(line.level, text)
    }

    private func hostLog(_ level: LibretroLogLevel, _ text: String) {
        text.withCString { log(level: Int32(level.rawValue), message: $0) }
    }

    // MARK: - Variables

    /// A C copy of `string` that lives as long as this environment, so past the core's
    /// `retro_deinit` (a core may keep what it is handed, such as `retro_game_info.path`).
    func ownedCString(_ string: String) -> UnsafeMutablePointer<CChar> {
        let pointer = strdup(string)!
        ownedStrings.append(pointer)
        return pointer
    }

    /// Parses `SET_VARIABLES` entries: "Description; first|second|...".
    private func declareVariables(_ list: UnsafePointer<retro_variable>) {
        var entry = list
        while let keyPointer = entry.pointee.key {
            let key = String(cString: keyPointer)
            let spec = entry.pointee.value.map { String(cString: $0) } ?? ""
            var description = spec
            var choices: [String] = []
            if let separator = spec.range(of: "; ") {
                description = String(spec[..<separator.lowerBound])
                choices = spec[separator.upperBound...].split(separator: "|", omittingEmptySubsequences: false)
                    .map(String.init)
            }
            var value = choices.first ?? ""
            if let wanted = overrides[key] {
                if choices.isEmpty || choices.contains(wanted) {
                    value = wanted
                } else {
                    rejectedOverrides.append("\(key)=\(wanted) (choices: \(choices.joined(separator: "|")))")
                }
            }
            let variable = LibretroVariable(key: key, description: description, choices: choices, value: value)
            if let index = variableIndex[key] {
                variables[index] = variable
            } else {
                variableIndex[key] = variables.count
                variables.append(variable)
            }
            variableValues[key] = ownedCString(value)
            entry += 1
        }
        variablesUpdated = true
    }

    /// Changes a declared variable; the core sees the change at its next `GET_VARIABLE_UPDATE`.
    func setVariable(_ key: String, to value: String) -> Bool {
        guard let index = variableIndex[key] else { return false }
        let choices = variables[index].choices
        guard choices.isEmpty || choices.contains(value) else { return false }
        variables[index].value = value
        variableValues[key] = ownedCString(value)
        variablesUpdated = true
        return true
    }

    // MARK: - Environment

    /// Answers one environment command. Returns false for commands the host does not support,
    /// which tells the core to do without.
    func handle(command: UInt32, data: UnsafeMutableRawPointer?) -> Bool {
        switch command {
        case RETRO_ENVIRONMENT_GET_CAN_DUPE:
            data?.assumingMemoryBound(to: Bool.self).pointee = true
            return data != nil
        case RETRO_ENVIRONMENT_SET_PIXEL_FORMAT:
            guard let format = data?.assumingMemoryBound(to: Int32.self).pointee,
                  format == RETRO_PIXEL_FORMAT_0RGB1555 || format == RETRO_PIXEL_FORMAT_XRGB8888
                    || format == RETRO_PIXEL_FORMAT_RGB565 else { return false }
            pixelFormat = format
            return true
        case RETRO_ENVIRONMENT_GET_SYSTEM_DIRECTORY, RETRO_ENVIRONMENT_GET_CORE_ASSETS_DIRECTORY:
            return answer(UnsafePointer(systemDirectoryString), into: data)
        case RETRO_ENVIRONMENT_GET_SAVE_DIRECTORY:
            return answer(UnsafePointer(saveDirectoryString), into: data)
        case RETRO_ENVIRONMENT_GET_LIBRETRO_PATH:
            return answer(UnsafePointer(corePathString), into: data)
        case RETRO_ENVIRONMENT_SET_VARIABLES:
            guard let data else { return false }
            declareVariables(UnsafePointer(data.assumingMemoryBound(to: retro_variable.self)))
            return true
        case RETRO_ENVIRONMENT_GET_VARIABLE:
            guard let variable = data?.assumingMemoryBound(to: retro_variable.self),
                  let keyPointer = variable.pointee.key else { return false }
            guard let value = variableValues[String(cString: keyPointer)] else {
                variable.pointee.value = nil
                return false
            }
            variable.pointee.value = UnsafePointer(value)
            return true
        case RETRO_ENVIRONMENT_GET_VARIABLE_UPDATE:
            data?.assumingMemoryBound(to: Bool.self).pointee = variablesUpdated
            variablesUpdated = false
            return data != nil
        case RETRO_ENVIRONMENT_GET_LOG_INTERFACE:
            guard let callback = data?.assumingMemoryBound(to: retro_log_callback.self) else { return false }
            callback.pointee.log = nlr_log_callback(slot)
            return true
        case RETRO_ENVIRONMENT_GET_INPUT_BITMASKS:
            return true
        case RETRO_ENVIRONMENT_GET_INPUT_DEVICE_CAPABILITIES:
            data?.assumingMemoryBound(to: UInt64.self).pointee = 1 << UInt64(RETRO_DEVICE_JOYPAD)
                | 1 << UInt64(RETRO_DEVICE_ANALOG)
            return data != nil
        case RETRO_ENVIRONMENT_GET_AUDIO_VIDEO_ENABLE:
            // Bit 0 video, bit 1 audio: off while a rollback re-simulates frames shown already.
            data?.assumingMemoryBound(to: Int32.self).pointee = Int32(nlr_slot_at(slot).pointee.av_enable)
            return data != nil
        case RETRO_ENVIRONMENT_GET_INPUT_MAX_USERS:
            data?.assumingMemoryBound(to: UInt32.self).pointee = UInt32(portCount)
            return data != nil
        case RETRO_ENVIRONMENT_GET_LANGUAGE:
            data?.assumingMemoryBound(to: UInt32.self).pointee = 0  // English
            return data != nil
        case RETRO_ENVIRONMENT_GET_FASTFORWARDING:
            data?.assumingMemoryBound(to: Bool.self).pointee = false
            return data != nil
        case RETRO_ENVIRONMENT_GET_SAVESTATE_CONTEXT:
            // States are loaded again by this instance and, through state transfers, by other
            // instances of the same binary on other machines: netplay rollback.
            data?.assumingMemoryBound(to: Int32.self).pointee = RETRO_SAVESTATE_CONTEXT_ROLLBACK_NETPLAY
            return data != nil
        case RETRO_ENVIRONMENT_SET_SERIALIZATION_QUIRKS:
            // In/out: the core's flags (the frontend's own bit ignored: a core setting it had its
            // states taken as of any size), answered with the quirks this host handles.
            guard let flags = data?.assumingMemoryBound(to: UInt64.self) else { return false }
            quirks = LibretroSerializationQuirks(rawValue: flags.pointee).intersection(.reportedByCores)
            flags.pointee = LibretroSerializationQuirks.answer(to: quirks).rawValue
            return true
        case RETRO_ENVIRONMENT_SET_SYSTEM_AV_INFO:
            guard let info = data?.assumingMemoryBound(to: retro_system_av_info.self).pointee else { return false }
            avInfoUpdate = info
            return true
        case RETRO_ENVIRONMENT_SET_GEOMETRY:
            guard let geometry = data?.assumingMemoryBound(to: retro_game_geometry.self).pointee else { return false }
            if var info = avInfoUpdate {
                info.geometry = geometry
                avInfoUpdate = info
            } else {
                avInfoUpdate = retro_system_av_info(geometry: geometry, timing: retro_system_timing(fps: 0, sample_rate: 0))
            }
            return true
        case RETRO_ENVIRONMENT_SET_MESSAGE, RETRO_ENVIRONMENT_SET_MESSAGE_EXT:
            // Both structs start with the message text.
            if let text = data?.assumingMemoryBound(to: UnsafePointer<CChar>?.self).pointee {
                hostLog(.info, "message: " + String(cString: text))
            }
            return data != nil
        case RETRO_ENVIRONMENT_SHUTDOWN:
            shutdownRequested = true
            return true
        case RETRO_ENVIRONMENT_SET_ROTATION, RETRO_ENVIRONMENT_SET_PERFORMANCE_LEVEL,
             RETRO_ENVIRONMENT_SET_INPUT_DESCRIPTORS, RETRO_ENVIRONMENT_SET_SUPPORT_NO_GAME,
             RETRO_ENVIRONMENT_SET_SUBSYSTEM_INFO, RETRO_ENVIRONMENT_SET_CONTROLLER_INFO,
             RETRO_ENVIRONMENT_SET_MEMORY_MAPS, RETRO_ENVIRONMENT_SET_SUPPORT_ACHIEVEMENTS:
            // Descriptions for a user interface: noted, nothing to do headless.
            return true
        default:
            // Unsupported: video/audio/HW render, frame-time and audio callbacks, core options
            // v1/v2 (the core then falls back to SET_VARIABLES), rumble, sensors, VFS...
            unansweredCommands.insert(command)
            return false
        }
    }

    private func answer(_ string: UnsafePointer<CChar>, into data: UnsafeMutableRawPointer?) -> Bool {
        guard let data else { return false }
        data.assumingMemoryBound(to: UnsafePointer<CChar>?.self).pointee = string
        return true
    }

    /// Points the slot's handlers at this object (unretained: the owner outlives the slot).
    func install() {
        let state = nlr_slot_at(slot)!
        state.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        state.pointee.environment = { context, command, data in
            Unmanaged<HostEnvironment>.fromOpaque(context!).takeUnretainedValue().handle(command: command, data: data)
        }
        state.pointee.log = { context, level, message in
            guard let message else { return }
            Unmanaged<HostEnvironment>.fromOpaque(context!).takeUnretainedValue().log(level: level, message: message)
        }
    }
}
