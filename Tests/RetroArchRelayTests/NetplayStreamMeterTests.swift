import NetplayTestSupport
import Rollback
import Testing
@testable import RetroArchRelay

@Suite("RetroArch stream meter", .ownThread)
struct NetplayStreamMeterTests {
    static func message(_ command: UInt32, _ payload: [UInt8]) -> [UInt8] {
        func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        return be(command) + be(UInt32(payload.count)) + payload
    }
    static func field(_ text: String) -> [UInt8] {
        Array(text.utf8) + [UInt8](repeating: 0, count: 32 - text.utf8.count)
    }
    /// A header, a NICK, an INFO, inputs, CRCs, a resync request and a large state.
    static let stream: [UInt8] = {
        var bytes = [UInt8](repeating: 0xAB, count: NetplayStreamMeter.headerSize)
        bytes += message(NetplayStreamMeter.Command.nick, field("ra-host"))
        bytes += message(NetplayStreamMeter.Command.info, [0x12, 0x34, 0x56, 0x78] + field("Nestopia") + field("1.52.0"))
        for frame in 0..<5 { bytes += message(NetplayStreamMeter.Command.input, [0, 0, 0, UInt8(frame), 0, 0, 0, 0, 0, 0, 0, 1]) }
        bytes += message(NetplayStreamMeter.Command.crc, [0, 0, 1, 44, 0xDE, 0xAD, 0xBE, 0xEF])
        bytes += message(NetplayStreamMeter.Command.requestSavestate, [])
        bytes += message(NetplayStreamMeter.Command.loadSavestate, [UInt8](repeating: 7, count: 70_000))
        bytes += message(NetplayStreamMeter.Command.crc, [0, 0, 1, 244, 0, 0, 0, 1])
        return bytes
    }()

    @Test func itCountsWhatTheStreamCarries() {
        var meter = NetplayStreamMeter()
        meter.consume(Self.stream)
        let seen = meter.observation
        #expect(seen.nick == "ra-host")
        #expect(seen.info?.core == "Nestopia" && seen.info?.version == "1.52.0" && seen.info?.crc == 0x1234_5678)
        #expect(seen.inputs == 5 && seen.crcChecks == 2 && seen.lastCRCFrame == 500 && seen.lastHostFrame == 4)
        #expect(seen.resyncRequests == 1 && seen.savestates == 1 && !seen.unreadable)
    }

    @Test func anyChunkingGivesTheSameResult() {
        var whole = NetplayStreamMeter()
        whole.consume(Self.stream)
        var generator = SeededRandom(seed: 7)
        for _ in 0..<20 {
            var meter = NetplayStreamMeter()
            var index = 0
            while index < Self.stream.count {
                let take = min(Int.random(in: 1...3_000, using: &generator), Self.stream.count - index)
                meter.consume(Array(Self.stream[index..<(index + take)]))
                index += take
            }
            #expect(meter.observation == whole.observation)
        }
    }

    @Test func aStreamThatIsNotNetplayIsPipedUnread() {
        var meter = NetplayStreamMeter()
        meter.consume([UInt8](repeating: 0, count: 24) + [0, 0, 0, 3, 0xFF, 0xFF, 0xFF, 0xFF] + [UInt8](repeating: 1, count: 100))
        #expect(meter.observation.unreadable)
        meter.consume(Self.message(NetplayStreamMeter.Command.input, [1]))
        #expect(meter.observation.inputs == 0)
    }
}
