@_spi(WireTesting) import NetplayWire
import Testing
import NetplayTestSupport

@Suite("Validation", .ownThread)
struct ValidationTests {
    @Test("every rule in the schema is enforced on encode", arguments: wireViolations)
    func encodeRejects(violation: WireViolation) {
        let envelope = Envelope(requestId: 9, body: violation.body)
        #expect(throws: violation.expected, "\(violation.label)") { try envelope.encoded() }
    }

    @Test("every rule in the schema is enforced on decode", arguments: wireViolations)
    func decodeRejects(violation: WireViolation) throws {
        let envelope = Envelope(requestId: 9, body: violation.body)
        let bytes = try envelope.encoded(validating: false)
        #expect(throws: violation.expected, "\(violation.label)") { try Envelope(decoding: bytes) }
    }

    @Test("every rule kind is exercised")
    func ruleKinds() {
        #expect(wireViolations.count == schemaViolationCount)
        var kinds = Set<String>()
        for violation in wireViolations {
            switch violation.expected {
            case .tooLong: kinds.insert("tooLong")
            case .outOfRange: kinds.insert("outOfRange")
            case .missingField: kinds.insert("missingField")
            default: kinds.insert("other")
            }
        }
        #expect(kinds == ["tooLong", "outOfRange", "missingField"])
    }

    @Test("garbage is not protobuf")
    func notProtobuf() {
        #expect(throws: WireError.notProtobuf) { try Envelope(decoding: [0xFF, 0xFF, 0xFF, 0xFF]) }
        // A length running past the end of the frame.
        #expect(throws: WireError.notProtobuf) { try Envelope(decoding: [2 << 3 | 2, 50, 0]) }
        // Wrong wire type for the oneof member (varint where a message is expected).
        #expect(throws: WireError.notProtobuf) { try Envelope(decoding: [16 << 3 | 0, 1]) }
    }

    @Test("an envelope without a body")
    func missingBody() {
        #expect(throws: WireError.missingBody) { try Envelope(decoding: []) }
        var w = ProtobufWriter()
        w.varintField(1, 42)
        #expect(throws: WireError.missingBody) { try Envelope(decoding: w.bytes) }
    }

    @Test("an envelope whose body this build does not know")
    func unknownBody() {
        var w = ProtobufWriter()
        w.varintField(1, 42)
        w.messageField(999) { $0.varintField(1, 1) }
        #expect(throws: WireError.unknownBody(fieldNumber: 999)) { try Envelope(decoding: w.bytes) }
    }

    @Test("a required message absent on the wire")
    func requiredMessageAbsent() {
        // AnnounceRoomRequest (body 60) without its @required room.
        var w = ProtobufWriter()
        w.messageField(60) { $0.stringField(3, "coordinator-1") }
        #expect(throws: WireError.missingField("AnnounceRoomRequest.room")) { try Envelope(decoding: w.bytes) }
        // A required message nested two levels down: AttachRequest.ticket.params.
        var nested = ProtobufWriter()
        nested.messageField(150) { attach in
            attach.messageField(1) { ticket in
                ticket.stringField(1, "s")
                ticket.stringField(2, "p")
            }
        }
        #expect(throws: WireError.missingField("JoinTicket.params")) { try Envelope(decoding: nested.bytes) }
    }

    @Test("repeated fields over their count on the wire")
    func repeatedTooMany() {
        // ChecksumReport (body 7): 17 checksums where 16 are allowed.
        var w = ProtobufWriter()
        w.messageField(7) { report in
            report.varintField(1, 1)
            for frame in 0..<17 { report.messageField(2) { $0.varintField(1, UInt64(frame)) } }
        }
        #expect(throws: WireError.tooLong(field: "ChecksumReport.checksums", limit: 16)) { try Envelope(decoding: w.bytes) }
    }

    @Test("unknown enum values are out of range")
    func enumOutOfRange() {
        var w = ProtobufWriter()
        w.messageField(2) { $0.varintField(1, 9999) }
        #expect(throws: WireError.outOfRange(field: "Error.code", detail: "9999 is not a value of enum ErrorCode")) {
            try Envelope(decoding: w.bytes)
        }
        var negative = ProtobufWriter()
        negative.messageField(2) { $0.varintField(1, UInt64(bitPattern: -1)) }
        #expect(throws: WireError.outOfRange(field: "Error.code", detail: "-1 is not a value of enum ErrorCode")) {
            try Envelope(decoding: negative.bytes)
        }
    }

    @Test("invalid UTF-8 is out of range")
    func invalidUTF8() {
        var w = ProtobufWriter()
        w.messageField(2) { $0.bytesField(2, [0x61, 0xC3, 0x28]) }
        #expect(throws: WireError.outOfRange(field: "Error.message", detail: "is not valid UTF-8")) {
            try Envelope(decoding: w.bytes)
        }
    }

    @Test("strings with NUL cannot be encoded")
    func embeddedNUL() {
        let envelope = Envelope(body: .error(ErrorReply(message: "a\u{0}b")))
        #expect(throws: WireError.outOfRange(field: "Error.message", detail: "contains a NUL character")) {
            try envelope.encoded()
        }
    }

    @Test("frames over the limit")
    func oversized() throws {
        let big = Envelope(body: .introspectResponse(IntrospectResponse(json: String(repeating: "x", count: 5000))))
        #expect(throws: WireError.oversized(size: 5007, limit: 4096)) {
            try big.encoded(limits: WireLimits(maxFrameBytes: 4096))
        }
        let bytes = try big.encoded()
        #expect(throws: WireError.oversized(size: 5007, limit: 1000)) {
            try Envelope(decoding: bytes, limits: WireLimits(maxFrameBytes: 1000))
        }
        #expect(throws: WireError.oversized(size: WireLimits.default.maxFrameBytes + 1, limit: WireLimits.default.maxFrameBytes)) {
            try Envelope(decoding: [UInt8](repeating: 0, count: WireLimits.default.maxFrameBytes + 1))
        }
    }

    @Test("errors map to error codes and read as sentences")
    func errorCodes() {
        let cases: [(WireError, ErrorCode)] = [
            (.notProtobuf, .malformed),
            (.missingBody, .malformed),
            (.unknownBody(fieldNumber: 3000), .unknownRequest),
            (.missingField("A.b"), .badRequest),
            (.outOfRange(field: "A.b", detail: "9 is outside 1...8"), .badRequest),
            (.tooLong(field: "A.b", limit: 64), .badRequest),
            (.oversized(size: 2, limit: 1), .payloadTooLarge),
            (.encodingFailed("x"), .internal),
        ]
        for (error, code) in cases {
            #expect(error.errorCode == code)
            #expect(error.description.hasSuffix("."))
            #expect(!error.description.contains("\n"))
            let reply = ErrorReply(error)
            #expect(reply.code == code)
            #expect(reply.message == error.description)
        }
        #expect(ErrorReply(WireError.tooLong(field: "Room.room_id", limit: 64)).field == "Room.room_id")
    }
}
