import Foundation
import NetplayTestSupport
import NetplayWire
import Testing

/// The small rules every module reads through NetplayWire: hex text, the wall clock, and the
/// short names of the schema's enumerations.
@Suite("NetplayWire's shared rules: hex, Unix time, enum short names", .ownThread)
struct SharedRulesTests {
    @Test func hexIsWrittenLowercaseAndReadInEitherCase() {
        #expect(Hex.encode([0x00, 0xAB, 0xFF]) == "00abff")
        #expect(Hex.encode("r1".utf8) == "7231")
        #expect(Hex.decode("00AbfF") == [0x00, 0xAB, 0xFF])
        #expect(Hex.decode("") == [])
        #expect(Hex.decode(Hex.encode((0...255).map(UInt8.init))) == (0...255).map(UInt8.init))
    }

    @Test(arguments: ["abc", "zz", "+f+f", "-1", " a", "0x00", "é0"])
    func hexRefusesAnythingButPairsOfDigits(text: String) {
        #expect(Hex.decode(text) == nil)
    }

    @Test func unixTimeIsTheWallClockInWholeMilliseconds() {
        let before = UInt64(Date().timeIntervalSince1970 * 1000)
        let now = UnixTime.nowMs()
        let after = UInt64(Date().timeIntervalSince1970 * 1000)
        #expect(before <= now && now <= after + 1)
    }

    @Test func shortNamesDropTheEnumerationsPrefixAndReadBackInAnyCase() {
        #expect(ServiceState.ready.shortName == "ready")
        #expect(ErrorCode.permissionDenied.shortName == "permission_denied")
        #expect(Severity.warning.shortName == "warning" && Severity.warning.protoName == "SEVERITY_WARNING")
        #expect(Severity(shortName: "WARNING") == .warning)
        #expect(RoomRemovalReason.allCases.allSatisfy { RoomRemovalReason(shortName: $0.shortName) == $0 })
        #expect(Severity(shortName: "SEVERITY_WARNING") == nil && Severity(shortName: "loud") == nil)
    }
}

extension SharedRulesTests {
    @Test func aRequestIdIsSalvagedFromTheStartOfAnUndecodableFrame() {
        #expect(EnvelopeHeader.salvageRequestId([0x08, 0x96, 0x01, 0xFF, 0xFF]) == 150)
        #expect(EnvelopeHeader.salvageRequestId([0x08, 0x07]) == 7)
        #expect(EnvelopeHeader.salvageRequestId([0x0A, 0x01]) == 0, "another field first")
        #expect(EnvelopeHeader.salvageRequestId([0x08]) == 0 && EnvelopeHeader.salvageRequestId([]) == 0)
        #expect(EnvelopeHeader.salvageRequestId([0x08] + Array(repeating: 0xFF, count: 11)) == 0, "longer than a varint")
    }
}
