import NetplayWire

// Run by CoordinatorTests and InputSyncTests: the same joins must get the same answers from the
// coordinator and from a LAN host, whose admission is the same code (NetplayAuth's AdmissionPolicy).

/// One admission case: a room (the host holds slot 1), a join, and the code expected (nil: admitted).
public struct AdmissionCase: Sendable, CustomStringConvertible {
    /// What the case checks, shown as the test argument.
    public let name: String
    /// The room's settings.
    public let room: SessionSettings
    /// The join sent to it.
    public let join: JoinSessionRequest
    /// The error code expected, nil when the join is admitted.
    public let expected: ErrorCode?
    public var description: String { name }
}

/// The cases both admission callers run.
public enum AdmissionCases {
    /// The content every test room plays.
    public static let content = ContentInfo(gameName: "Arena", crc32: 0xA7E7_A001, md5: Array(repeating: 7, count: 16), coreId: "arena",
                                     coreVersion: "1", system: "test")
    /// The settings of a test room.
    public static func room(players: UInt32 = 2, spectators: UInt32 = 2, play: String = "", spectate: String = "") -> SessionSettings {
        var settings = SessionSettings(roomName: "cases", content: content, maxPlayers: players, spectatorsAllowed: spectators > 0,
                                       maxSpectators: spectators, playPassword: play, spectatePassword: spectate)
        settings.inputSize = 2
        return settings
    }

    /// A join of `role` with `password` and `content`, asking for `slot` (0: the first free).
    public static func join(_ role: Role = .player, password: String = "", content: ContentInfo = content, slot: UInt32 = 0,
                     sessionId: String = "") -> JoinSessionRequest {
        JoinSessionRequest(sessionId: sessionId, role: role, name: "joiner", password: password, content: content, preferredSlot: slot)
    }

    /// ``content`` with `change` applied.
    public static func with(_ change: (inout ContentInfo) -> Void) -> ContentInfo {
        var changed = content
        change(&changed)
        return changed
    }

    /// Every case.
    public static let all: [AdmissionCase] = [
        AdmissionCase(name: "same content, open room", room: room(), join: join(), expected: nil),
        AdmissionCase(name: "empty content does not skip the check", room: room(), join: join(content: ContentInfo()),
                      expected: .contentMismatch),
        AdmissionCase(name: "other CRC32", room: room(), join: join(content: with { $0.crc32 = 1 }), expected: .contentMismatch),
        AdmissionCase(name: "other MD5", room: room(), join: join(content: with { $0.md5 = [1] }), expected: .contentMismatch),
        AdmissionCase(name: "other core", room: room(), join: join(content: with { $0.coreId = "other" }), expected: .coreMismatch),
        AdmissionCase(name: "other core version", room: room(), join: join(content: with { $0.coreVersion = "2" }),
                      expected: .coreVersionMismatch),
        AdmissionCase(name: "spectator naming no content", room: room(), join: join(.spectator, content: ContentInfo()), expected: nil),
        AdmissionCase(name: "spectator with other content", room: room(), join: join(.spectator, content: with { $0.crc32 = 1 }),
                      expected: .contentMismatch),
        AdmissionCase(name: "no spectators allowed", room: room(spectators: 0), join: join(.spectator), expected: .spectatorsNotAllowed),
        AdmissionCase(name: "slot beyond max players", room: room(), join: join(slot: 5), expected: .badRequest),
        AdmissionCase(name: "the host's slot", room: room(), join: join(slot: 1), expected: .slotTaken),
        AdmissionCase(name: "a one-player room is full", room: room(players: 1), join: join(), expected: .roomFull),
        AdmissionCase(name: "play password missing", room: room(play: "pw"), join: join(), expected: .wrongPassword),
        AdmissionCase(name: "play password right", room: room(play: "pw"), join: join(password: "pw"), expected: nil),
        AdmissionCase(name: "spectator of a play-password room without it", room: room(play: "pw"), join: join(.spectator),
                      expected: .wrongPassword),
        AdmissionCase(name: "spectator with the play password", room: room(play: "pw"), join: join(.spectator, password: "pw"),
                      expected: nil),
        AdmissionCase(name: "spectator with the spectate password", room: room(play: "pw", spectate: "watch"),
                      join: join(.spectator, password: "watch"), expected: nil),
        AdmissionCase(name: "player with only the spectate password", room: room(play: "pw", spectate: "watch"),
                      join: join(password: "watch"), expected: .wrongPassword),
        AdmissionCase(name: "player in a spectate-only-password room", room: room(spectate: "watch"), join: join(), expected: nil),
        AdmissionCase(name: "spectator in a spectate-only-password room without it", room: room(spectate: "watch"),
                      join: join(.spectator), expected: .wrongPassword),
    ]

    /// The password budget both callers run with in these cases, and what it allows: this many
    /// wrong guesses answer WRONG_PASSWORD, every later join needing the password (the right
    /// one included) RATE_LIMITED.
    public static let attemptsPerMinute = 5
}
