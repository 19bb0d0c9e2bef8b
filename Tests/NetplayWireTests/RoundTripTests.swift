import CNetplayProto
import Foundation
import NetplayWire
import Testing
import NetplayTestSupport

@Suite("Round trips", .ownThread)
struct RoundTripTests {
    @Test("every Envelope body has a sample, and the schema agrees with protoc-c")
    func coverage() {
        // protoc-c's descriptor of Envelope: request_id plus one field per oneof member.
        let descriptorMembers = Int(netplay__v1__envelope__descriptor.n_fields) - 1
        #expect(allBodySamples.count == descriptorMembers)
        #expect(allBodySamples.count == schemaBodyMemberCount)
        #expect(Set(allBodySamples.map(\.name)).count == allBodySamples.count)
        #expect(Set(allBodySamples.map(\.fieldNumber)).count == allBodySamples.count)
    }

    @Test("every body round-trips with every field set", arguments: allBodySamples)
    func roundTrip(body: Envelope.Body) throws {
        let envelope = Envelope(requestId: 0xFEED_FACE_CAFE_BEEF, body: body)
        let bytes = try envelope.encoded()
        let decoded = try Envelope(decoding: bytes)
        #expect(decoded == envelope)
        // Zero-copy path gives the same result.
        let borrowed = try bytes.withUnsafeBytes { raw in try Envelope(decoding: raw) }
        #expect(borrowed == envelope)
        // Encoding is deterministic.
        #expect(try decoded.encoded() == bytes)
    }

    @Test("every body renders as one line of valid JSON", arguments: allBodySamples)
    func json(body: Envelope.Body) throws {
        let envelope = Envelope(requestId: 7, body: body)
        let line = envelope.jsonLine()
        #expect(!line.contains("\n"))
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        let unwrapped = try #require(object)
        #expect(unwrapped["requestId"] as? Int == 7)
        #expect(unwrapped.count == 2, "requestId plus exactly one body key: \(line)")
    }

    @Test("JSON escapes strings and renders bytes as hex")
    func jsonDetails() {
        let line = Envelope(
            requestId: 1,
            body: .error(ErrorReply(code: .roomFull, message: "quote \" backslash \\ tab \t nl \n bell \u{7}"))
        ).jsonLine()
        #expect(line == #"{"requestId":1,"error":{"code":"ERROR_CODE_ROOM_FULL","message":"quote \" backslash \\ tab \t nl \n bell \u0007","retryAfterMs":0,"field":""}}"#)
        let content = ContentInfo(md5: [0x00, 0xAB, 0xFF])
        #expect(content.jsonLine().contains(#""md5":"00abff""#))
        let metric = Metric(name: "m", kind: .gauge, value: .nan, bucketBounds: [0.5, .infinity])
        #expect(metric.jsonLine() == #"{"name":"m","help":"","kind":"KIND_GAUGE","labels":[],"value":"nan","bucketBounds":[0.5,"inf"],"bucketCounts":[],"sum":0.0,"count":0}"#)
    }

    @Test("the smallest envelopes")
    func minimal() throws {
        let health = Envelope(body: .healthRequest(HealthRequest()))
        let bytes = try health.encoded()
        // Field 16, wire type 2: tag varint 0x82 0x01, then an empty payload.
        #expect(bytes == [0x82, 0x01, 0x00])
        #expect(try Envelope(decoding: bytes) == health)
        #expect(health.body.name == "HealthRequest")
    }

    @Test("every message of the schema round-trips on its own")
    func everyMessage() throws {
        #expect(allMessageSamples.count == schemaMessageCount)
        func check<M: WireMessage>(_ message: M) throws {
            let bytes = try message.encoded()
            #expect(try M(decoding: bytes, limits: .default) == message, "\(M.protoName)")
            #expect(!message.jsonLine().isEmpty)
        }
        for sample in allMessageSamples {
            try check(sample)
        }
    }

    @Test("a reply keeps the request id")
    func reply() {
        let request = Envelope(requestId: 99, body: .healthRequest(HealthRequest()))
        let reply = request.reply(.error(ErrorReply(WireError.missingBody)))
        #expect(reply.requestId == 99)
        #expect(reply.body.name == "Error")
    }

    @Test("messages encode alone too")
    func standalone() throws {
        let response = HealthResponse.sample
        let decoded = try HealthResponse(decoding: try response.encoded())
        #expect(decoded == response)
        #expect(HealthResponse.protoName == "HealthResponse")
        #expect(ErrorReply.protoName == "Error")
    }
}
