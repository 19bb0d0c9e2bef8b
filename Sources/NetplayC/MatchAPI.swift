import CNetplayAPI
import Foundation
import NetplayKit
import NetplayWire
import Rollback

// Opening a match: np_client_host, np_client_join, np_client_spectate.

extension np_content {
    /// The wire form of the content. The core's id and version are trimmed of surrounding
    /// spaces, as the libretro host trims `library_version` (nestopia reports "1.52.0 "), so a C
    /// frontend passing the core's own strings matches netplay-peer's rooms.
    var contentInfo: ContentInfo {
        var md5Bytes = [UInt8](repeating: 0, count: 16)
        withUnsafeBytes(of: md5) { md5Bytes = Array($0) }
        func trimmed(_ text: UnsafePointer<CChar>?) -> String { (string(text) ?? "").trimmingCharacters(in: .whitespaces) }
        return ContentInfo(gameName: string(game_name) ?? "", crc32: crc32, md5: md5Bytes, coreId: trimmed(core_id),
                           coreVersion: trimmed(core_version), system: string(system) ?? "", contentSize: size)
    }
}

extension np_host_settings {
    /// The SDK's settings, checked for a game with `inputSize`-byte inputs.
    func netplaySettings(inputSize: Int) throws(CAPIFailure) -> NetplaySettings {
        guard let name = string(room_name) else { throw .invalid("settings.room_name is NULL") }
        guard frame_delay >= -1 else { throw .invalid("settings.frame_delay must be -1 (automatic) or 0 ... 15") }
        guard max_spectators >= 0 else { throw .invalid("settings.max_spectators must be 0 ... 64") }
        var settings = NetplaySettings(roomName: name)
        settings.maxPlayers = Int(max_players)
        settings.automaticFrameDelay = frame_delay == -1
        if frame_delay >= 0 { settings.frameDelay = Int(frame_delay) }
        settings.allowSpectators = max_spectators > 0
        settings.maxSpectators = Int(max_spectators)
        settings.password = string(password).flatMap { $0.isEmpty ? nil : $0 }
        settings.spectatePassword = string(spectate_password).flatMap { $0.isEmpty ? nil : $0 }
        settings.network = lan != 0 ? .lan : .relay
        settings.region = string(region) ?? ""
        settings.predictionWindow = Int(prediction_window)
        settings.lagTolerance = Int(lag_tolerance)
        settings.spectatorDelay = Int(spectator_delay)
        settings.checksumInterval = Int(checksum_interval)
        settings.frameRateMilliHertz = Int(frame_rate_millihertz)
        settings.unlisted = unlisted != 0
        if let problem = settings.validationError(inputSize: inputSize) { throw .invalid(problem) }
        return settings
    }

    /// The replay header's game options.
    var gameOptions: [UInt8] {
        guard let game_options, game_options_size > 0 else { return [] }
        return [UInt8](UnsafeBufferPointer(start: game_options, count: game_options_size))
    }
}

/// `NP_ERR_INVALID_ARGUMENT` naming the field when `message`, made of the caller's strings,
/// breaks the wire's limits (a game name over 128 bytes, a password over 128, a region over 32):
/// checked before anything is sent, as capi.md promises (it failed at the send, reported as the
/// service not answering).
func requireWireFit(_ message: some WireMessage, _ what: String) throws(CAPIFailure) {
    if let problem = message.wireProblem { throw .invalid("\(what): \(problem.description)") }
}

/// The defaults `np_host_settings_init` fills in.
func hostSettingsDefaults() -> np_host_settings {
    let defaults = NetplaySettings(roomName: "")
    return np_host_settings(
        struct_size: UInt32(MemoryLayout<np_host_settings>.size), room_name: nil, max_players: Int32(defaults.maxPlayers),
        frame_delay: -1, max_spectators: Int32(defaults.maxSpectators), password: nil, spectate_password: nil, lan: 0,
        region: nil, prediction_window: Int32(defaults.predictionWindow), lag_tolerance: Int32(defaults.lagTolerance),
        spectator_delay: Int32(defaults.spectatorDelay), checksum_interval: Int32(defaults.checksumInterval),
        frame_rate_millihertz: Int32(defaults.frameRateMilliHertz), unlisted: 0, game_options: nil, game_options_size: 0)
}

@_cdecl("np_host_settings_init_sized")
public func np_host_settings_init_sized(_ settings: UnsafeMutablePointer<np_host_settings>?, _ size: Int) {
    writeVersioned(hostSettingsDefaults(), to: settings, size: size, sizes: StructVersions.hostSettings)
}

/// Registers a new match and hands its handle out.
private func open(_ match: NetplayMatch<CallbackGame>, _ callbacks: GameCallbacks, lanHost: LanHost?, client: ClientHandle,
                  out: UnsafeMutablePointer<OpaquePointer?>) {
    callbacks.inputSize = Int(match.params.inputSize)
    match.start()  // attaches on the first tick
    out.pointee = HandleRegistry.register(MatchHandle(match: match, callbacks: callbacks, lanHost: lanHost, lobby: client.client.lobby))
}

@_cdecl("np_client_host")
public func np_client_host(_ client: OpaquePointer?, _ settings: UnsafePointer<np_host_settings>?, _ content: UnsafePointer<np_content>?,
                           _ inputSize: Int, _ game: UnsafePointer<np_game_callbacks>?,
                           _ out: UnsafeMutablePointer<OpaquePointer?>?) -> np_result {
    entry {
        let handle = try ClientHandle.from(client)
        guard let given = settings, let content, let out else { throw CAPIFailure.invalid("settings, content and out must not be NULL") }
        guard (1 ... GameInput.maxSize).contains(inputSize) else {
            throw CAPIFailure.invalid("input_size must be 1 ... \(GameInput.maxSize), got \(inputSize)")
        }
        let settings = try readVersioned(given, "np_host_settings", sizes: StructVersions.hostSettings, defaults: hostSettingsDefaults())
        let netplaySettings = try settings.netplaySettings(inputSize: inputSize)
        let contentInfo = content.pointee.contentInfo
        try requireWireFit(netplaySettings.sessionSettings(content: contentInfo, inputSize: inputSize), "settings or content")
        let callbacks = try GameCallbacks(game)
        let hosted = try handle.client.host(game: CallbackGame(callbacks: callbacks), inputSize: inputSize, settings: netplaySettings,
                                            content: contentInfo, gameOptions: settings.gameOptions)
        open(hosted.match, callbacks, lanHost: hosted.lanHost, client: handle, out: out)
    }
}

@_cdecl("np_client_join")
public func np_client_join(_ client: OpaquePointer?, _ room: UnsafePointer<np_room>?, _ content: UnsafePointer<np_content>?,
                           _ password: UnsafePointer<CChar>?, _ preferredSlot: Int32, _ game: UnsafePointer<np_game_callbacks>?,
                           _ out: UnsafeMutablePointer<OpaquePointer?>?) -> np_result {
    entry {
        let handle = try ClientHandle.from(client)
        guard let room, let out else { throw CAPIFailure.invalid("room and out must not be NULL") }
        guard (0 ... 8).contains(preferredSlot) else { throw CAPIFailure.invalid("preferred_slot must be 0 ... 8") }
        let contentInfo = content?.pointee.contentInfo ?? ContentInfo()
        let passwordText = string(password) ?? ""
        try requireWireFit(JoinSessionRequest(sessionId: "-", role: .player, name: "-", password: passwordText, content: contentInfo),
                           "password or content")
        let callbacks = try GameCallbacks(game)
        let match = try handle.client.join(room.pointee.netplayRoom(), game: CallbackGame(callbacks: callbacks),
                                           content: contentInfo, password: passwordText, preferredSlot: Int(preferredSlot))
        open(match, callbacks, lanHost: nil, client: handle, out: out)
    }
}

@_cdecl("np_client_spectate")
public func np_client_spectate(_ client: OpaquePointer?, _ room: UnsafePointer<np_room>?, _ password: UnsafePointer<CChar>?,
                               _ game: UnsafePointer<np_game_callbacks>?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> np_result {
    entry {
        let handle = try ClientHandle.from(client)
        guard let room, let out else { throw CAPIFailure.invalid("room and out must not be NULL") }
        let passwordText = string(password) ?? ""
        try requireWireFit(JoinSessionRequest(sessionId: "-", role: .spectator, name: "-", password: passwordText, content: ContentInfo()), "password")
        let callbacks = try GameCallbacks(game)
        let match = try handle.client.spectate(room.pointee.netplayRoom(), game: CallbackGame(callbacks: callbacks),
                                               password: passwordText)
        open(match, callbacks, lanHost: nil, client: handle, out: out)
    }
}
