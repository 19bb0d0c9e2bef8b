/// What one direction of a piped RetroArch netplay stream has shown so far.
public struct NetplayStreamObservation: Sendable, Equatable {
    /// INPUT messages.
    public var inputs: UInt64 = 0
    /// CRC messages (the host's state checks).
    public var crcChecks: UInt64 = 0
    /// The frame of the last CRC message.
    public var lastCRCFrame: UInt32 = 0
    /// The frame of the last INPUT of client 0 (the host's own) or NOINPUT: the host's frame.
    public var lastHostFrame: UInt32 = 0
    /// REQUEST_SAVESTATE messages (a client whose CRC check failed).
    public var resyncRequests: UInt64 = 0
    /// LOAD_SAVESTATE messages.
    public var savestates: UInt64 = 0
    /// PING_REQUEST messages.
    public var pingRequests: UInt64 = 0
    /// PING_RESPONSE messages.
    public var pingResponses: UInt64 = 0
    /// The last NICK message's name.
    public var nick: String?
    /// The last INFO message: core name, core version, content CRC.
    public var info: (core: String, version: String, crc: UInt32)?
    /// True once the stream stopped making sense as RetroArch netplay (it is still piped, no
    /// longer read).
    public var unreadable = false

    /// An empty observation.
    public init() {}

    public static func == (a: Self, b: Self) -> Bool {
        a.inputs == b.inputs && a.crcChecks == b.crcChecks && a.lastCRCFrame == b.lastCRCFrame && a.lastHostFrame == b.lastHostFrame && a.resyncRequests == b.resyncRequests
            && a.savestates == b.savestates && a.pingRequests == b.pingRequests && a.pingResponses == b.pingResponses
            && a.nick == b.nick && a.info?.core == b.info?.core && a.info?.version == b.info?.version && a.info?.crc == b.info?.crc
            && a.unreadable == b.unreadable
    }
}

/// Reads one direction of a RetroArch netplay stream as it is piped, without holding it: skips the
/// connection header, then follows the `[u32 command][u32 size][payload]` framing (big-endian) and
/// counts the messages a relay can judge a session's health by. Payloads are kept only for the few
/// small messages it reads (NICK, INFO, CRC); everything else is skipped byte-count only, so any
/// chunking of the stream gives the same result.
public struct NetplayStreamMeter: Sendable {
    /// RetroArch netplay command numbers (network/netplay/netplay_private.h, 1.14).
    public enum Command {
        public static let input: UInt32 = 0x0003
        public static let noInput: UInt32 = 0x0004
        public static let nick: UInt32 = 0x0020
        public static let info: UInt32 = 0x0022
        public static let crc: UInt32 = 0x0040
        public static let requestSavestate: UInt32 = 0x0041
        public static let loadSavestate: UInt32 = 0x0042
        public static let pingRequest: UInt32 = 0x1100
        public static let pingResponse: UInt32 = 0x1101
    }
    /// The connection header each side sends first.
    public static let headerSize = 24
    /// A payload larger than this means the stream is not netplay (or not one we can follow).
    public static let maxPayload: UInt32 = 64 << 20
    /// NICK and INFO name fields.
    static let nameSize = 32

    private var headerLeft = Self.headerSize
    private var frameHeader: [UInt8] = []
    private var command: UInt32 = 0
    private var payloadLeft: Int = 0
    private var payload: [UInt8] = []
    private var keepsPayload = false
    /// What the stream has shown.
    public private(set) var observation = NetplayStreamObservation()

    /// A meter at the start of a stream.
    public init() {}

    /// Reads the next bytes of the stream.
    public mutating func consume(_ bytes: UnsafeRawBufferPointer) {
        guard !observation.unreadable else { return }
        var index = 0
        let count = bytes.count
        while index < count {
            if headerLeft > 0 {
                let take = min(headerLeft, count - index)
                headerLeft -= take
                index += take
            } else if payloadLeft > 0 {
                let take = min(payloadLeft, count - index)
                if keepsPayload { payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)])) }
                payloadLeft -= take
                index += take
                if payloadLeft == 0 { finishMessage() }
            } else {
                frameHeader.append(bytes[index])
                index += 1
                if frameHeader.count == 8 { beginMessage() }
            }
        }
    }

    /// Reads the next bytes of the stream.
    public mutating func consume(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { consume($0) }
    }

    private mutating func beginMessage() {
        command = TunnelWire.magic(frameHeader)
        let size = TunnelWire.magic(frameHeader.dropFirst(4))
        frameHeader.removeAll(keepingCapacity: true)
        guard size <= Self.maxPayload else {
            observation.unreadable = true
            return
        }
        keepsPayload = [Command.nick, Command.info, Command.crc, Command.input, Command.noInput].contains(command) && size <= 4_096
        payload.removeAll(keepingCapacity: true)
        payloadLeft = Int(size)
        if payloadLeft == 0 { finishMessage() }
    }

    private mutating func finishMessage() {
        switch command {
        case Command.input:
            observation.inputs += 1
            if payload.count >= 8, TunnelWire.magic(payload[4...]) & 0xFFFF == 0 { observation.lastHostFrame = TunnelWire.magic(payload) }
        case Command.noInput where payload.count >= 4:
            observation.lastHostFrame = TunnelWire.magic(payload)
        case Command.requestSavestate: observation.resyncRequests += 1
        case Command.loadSavestate: observation.savestates += 1
        case Command.pingRequest: observation.pingRequests += 1
        case Command.pingResponse: observation.pingResponses += 1
        case Command.crc:
            observation.crcChecks += 1
            if payload.count >= 4 { observation.lastCRCFrame = TunnelWire.magic(payload) }
        case Command.nick where payload.count >= Self.nameSize:
            observation.nick = Self.text(payload[0..<Self.nameSize])
        case Command.info where payload.count >= 4 + 2 * Self.nameSize && observation.info == nil:
            // Content CRC32, then the core's name and version. The first only: RetroArch sends
            // one in its handshake, and a joiner's later one would rename the session's content.
            observation.info = (Self.text(payload[4..<(4 + Self.nameSize)]), Self.text(payload[(4 + Self.nameSize)..<(4 + 2 * Self.nameSize)]),
                                TunnelWire.magic(payload))
        default: break
        }
        payload.removeAll(keepingCapacity: true)
        keepsPayload = false
    }

    /// A NUL-padded fixed-size string field, as UTF-8 (invalid bytes replaced).
    static func text(_ field: ArraySlice<UInt8>) -> String {
        String(decoding: field.prefix { $0 != 0 }, as: UTF8.self)
    }
}
