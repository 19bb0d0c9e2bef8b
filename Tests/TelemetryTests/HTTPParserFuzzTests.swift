import Foundation
import NetplayTestSupport
import Rollback
import Testing
@testable import Telemetry

/// The fuzz runs' seeded generator (reproducible).
typealias FuzzRandom = SeededRandom

/// The HTTP request parser as a pure function: what a peer may send must never trap it, every
/// malformed head is refused with 400 (431 when too large), and whatever it accepts is a
/// well-formed request that survives a round trip.
@Suite("HTTP request parser", .ownThread)
struct HTTPParserTests {
    static let iterations = 120_000

    static let seeds: [String] = [
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9400\r\nAccept: */*\r\nUser-Agent: Prometheus/2.45.0\r\n\r\n",
        "HEAD /healthz HTTP/1.0\r\n\r\n",
        "GET /api/events?limit=5&topic=sync.&severity=warning&session=s%201 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /api/sessions/abc%2Fdef?history=0 HTTP/1.1\r\nConnection: keep-alive\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
        "GET /?a=1&b=2&a=3+4 HTTP/1.1\r\nHost: h\r\nCookie: x=y; z=w\r\nAccept-Language: fr-CH, fr;q=0.9\r\n\r\n",
        "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
        "GET /metrics?= HTTP/1.1\r\n\r\n",
    ]
    /// Fragments that stress the grammar's corners.
    static let nasty: [String] = ["%", "%zz", "%2", "%41", "%00", "%ff", "%c3", "%c3%a9", "%e2%82", "?", "=", "&", "&&", "?=", "?&&=",
                                  "+", "#", " ", "  ", "\t", "\r", "\n", "\r\n", "\r\n\r\n", ":", "::", " : ", "\u{7f}", "é", "\0",
                                  "HTTP/1.1", "HTTP/1.", "HTTP/2", "GET", "/", "//", "..", "%2e%2e", "*", "http://x/"]

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// What the server does with received bytes: find the blank line, parse the head before it.
    static func serve(_ input: [UInt8]) -> Result<HTTPRequest, HTTPRequestError> {
        let head = HTTPServer.headEnd(input).map { input[..<$0] } ?? input[...]
        return Result { () throws(HTTPRequestError) in try HTTPRequest.parse(head: head) }
    }

    static func mutate(_ input: inout [UInt8], using rng: inout FuzzRandom) {
        switch Int.random(in: 0..<7, using: &rng) {
        case 0 where !input.isEmpty:
            let i = Int.random(in: 0..<input.count, using: &rng)
            input[i] ^= 1 << UInt8.random(in: 0...7, using: &rng)
        case 1 where !input.isEmpty:
            input[Int.random(in: 0..<input.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
        case 2 where !input.isEmpty:
            input.removeLast(Int.random(in: 1...input.count, using: &rng))
        case 3, 4:
            let at = Int.random(in: 0...input.count, using: &rng)
            input.insert(contentsOf: bytes(nasty.randomElement(using: &rng)!), at: at)
        case 5 where input.count > 1:
            let a = Int.random(in: 0..<input.count, using: &rng)
            let b = Int.random(in: a...min(input.count, a + 16), using: &rng)
            input.removeSubrange(a..<b)
        default:
            let other = bytes(seeds.randomElement(using: &rng)!)
            let cut = Int.random(in: 0...input.count, using: &rng)
            input = Array(input[..<cut]) + Array(other[Int.random(in: 0...other.count, using: &rng)...])
        }
    }

    static func input(_ iteration: Int, using rng: inout FuzzRandom) -> [UInt8] {
        switch iteration % 10 {
        case 0:  // noise
            return (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        case 1:  // printable noise with line breaks
            var out: [UInt8] = []
            for _ in 0..<Int.random(in: 0...200, using: &rng) {
                out += Int.random(in: 0..<12, using: &rng) == 0 ? [13, 10] : [UInt8.random(in: 32...126, using: &rng)]
            }
            return out
        case 2, 3, 4:  // mutated valid requests
            var out = bytes(seeds.randomElement(using: &rng)!)
            for _ in 0..<Int.random(in: 1...4, using: &rng) { mutate(&out, using: &rng) }
            return out
        case 5:  // truncated
            let seed = bytes(seeds.randomElement(using: &rng)!)
            return Array(seed.prefix(Int.random(in: 0...seed.count, using: &rng)))
        case 6:  // huge heads: long values or many header lines
            var text = "GET /metrics HTTP/1.1\r\n"
            if Bool.random(using: &rng) {
                text += "X-Long: " + String(repeating: "a", count: Int.random(in: 1_000...20_000, using: &rng)) + "\r\n"
            } else {
                for n in 0..<Int.random(in: 50...250, using: &rng) { text += "X-H\(n): v\(n)\r\n" }
            }
            return bytes(text + "\r\n")
        case 7, 8:  // odd query strings
            var query = ""
            for _ in 0..<Int.random(in: 0...8, using: &rng) {
                query += ["=", "&", "%", "%zz", "%2", "%41", "+", "a", "k", "v", "%e9", "%c3%a9", "?", "==", ";", "%26", "%3D", "%00", "é"]
                    .randomElement(using: &rng)!
            }
            return bytes("GET /metrics?\(query) HTTP/1.1\r\nHost: x\r\n\r\n")
        default:  // a request line assembled from parts
            let method = ["GET", "HEAD", "POST", "", "G ET", "get", "GET\t", String(repeating: "G", count: 40)].randomElement(using: &rng)!
            let target = ["/", "/metrics", "", "metrics", "*", "http://x/metrics", "/a b", "/%", "/%zz", "/%2F", "/#frag", "/\u{7f}", "/é"]
                .randomElement(using: &rng)!
            let version = ["HTTP/1.1", "HTTP/1.0", "HTTP/1.", "HTTP/2.0", "http/1.1", "", "HTTP/1.1 extra"].randomElement(using: &rng)!
            let header = ["", "Host: x\r\n", "Host : x\r\n", " folded\r\n", "NoColon\r\n", ": v\r\n", "K: v\u{1}\r\n", "K:\tv \r\n"]
                .randomElement(using: &rng)!
            return bytes("\(method) \(target) \(version)\r\n\(header)\r\n")
        }
    }

    /// `value` percent-encoded except for unreserved characters (so it re-parses to itself).
    static func encode(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            if (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || [0x2D, 0x2E, 0x5F, 0x7E].contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    static func checkAccepted(_ request: HTTPRequest) {
        #expect(!request.method.isEmpty && request.method.utf8.allSatisfy(HTTPRequest.isTokenByte))
        #expect(request.path.hasPrefix("/"))
        let texts = [request.path] + Array(request.query.keys) + Array(request.query.values) + Array(request.headers.values)
        #expect(!texts.contains { $0.unicodeScalars.contains { $0.value < 32 && $0 != "\t" || $0.value == 127 } })
        // Round trip: the request written out canonically parses to the same request.
        var text = "\(request.method) \(request.path.split(separator: "/", omittingEmptySubsequences: false).map { encode(String($0)) }.joined(separator: "/"))"
        if !request.query.isEmpty {
            text += "?" + request.query.sorted { $0.key < $1.key }.map { "\(encode($0.key))=\(encode($0.value))" }.joined(separator: "&")
        }
        text += " HTTP/1.1"
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) { text += "\r\n\(name): \(value)" }
        let again = try? HTTPRequest.parse(head: Array(text.utf8)[...])
        #expect(again == request, "round trip of \(text.debugDescription)")
    }

    @Test("120,000 generated request heads never trap the parser")
    func fuzz() {
        var rng = FuzzRandom(seed: 0x6874_7470_2F31_2E31)
        var accepted = 0
        var refusals: [String: Int] = [:]
        for iteration in 0..<Self.iterations {
            switch Self.serve(Self.input(iteration, using: &rng)) {
            case .success(let request):
                accepted += 1
                if accepted % 7 == 0 { Self.checkAccepted(request) }  // a sample: the round trip is the slow part
            case .failure(let error):
                #expect(error.status == 400 || error.status == 431)
                #expect(!error.message.isEmpty)
                refusals[error.message, default: 0] += 1
            }
        }
        print("http fuzz: \(Self.iterations) heads, \(accepted) accepted, \(refusals.count) kinds of refusal")
        #expect(accepted > 5_000, "mutations should often stay valid")
        for reason in ["bare CR in the request head", "bare LF in the request head", "the request line must be METHOD TARGET VERSION",
                       "malformed method", "only HTTP/1.0 and HTTP/1.1 are supported", "the request target must be a path starting with /",
                       "the request target holds a character that must be percent-encoded",
                       "the path has a bad percent-encoding or is not UTF-8", "a query parameter has a bad percent-encoding or is not UTF-8",
                       "folded header lines are not supported", "a header line has no colon", "malformed header name",
                       "a header value holds a control character", "request head larger than 16384 bytes", "more than 100 header lines"] {
            #expect(refusals[reason, default: 0] > 0, "the fuzzer should reach '\(reason)'")
        }
    }

    @Test(arguments: [
        ("GET /metrics?= HTTP/1.1", 200), ("GET /metrics?&&= HTTP/1.1", 200), ("GET /metrics?=& HTTP/1.1", 200), ("GET /metrics? HTTP/1.1", 200),
        ("GET /metrics?=== HTTP/1.1", 200), ("GET /metrics?% HTTP/1.1", 400), ("GET /metrics?%zz HTTP/1.1", 400),
        ("GET /metrics?a=%4 HTTP/1.1", 400), ("GET /metrics?a=%ff HTTP/1.1", 400), ("GET /%00 HTTP/1.1", 400), ("GET /% HTTP/1.1", 400),
        ("GET /a%20b HTTP/1.1", 200), ("GET / HTTP/1.1\r\nBad Header: x", 400), ("GET / HTTP/1.1\r\n folded", 400),
        ("GET / HTTP/1.1\nHost: x", 400), ("GET / HTTP/1.1\r\nHost: a\rb", 400), ("", 400), ("GET", 400), ("GET  / HTTP/1.1", 400),
        ("GET / HTTP/1.1 ", 400), ("GET http://x/ HTTP/1.1", 400), ("GET / HTTP/1.2", 400), ("GET / HTTP/1.1\r\n\r\nGET", 400),
    ])
    func nastyHeads(head: String, status: Int) {
        let result = Result { () throws(HTTPRequestError) in try HTTPRequest.parse(head: Array(head.utf8)[...]) }
        switch result {
        case .success(let request): #expect(status == 200, "accepted \(head.debugDescription) as \(request)")
        case .failure(let error): #expect(error.status == status, "\(head.debugDescription): \(error.message)")
        }
    }

    @Test func queriesDecodeLikeForms() throws {
        let request = try HTTPRequest.parse(head: Array("GET /api/events?=&limit=5&&topic=sync.&x=a+b%2Bc&x=last&flag HTTP/1.1\r\nHost:  h \t".utf8)[...])
        #expect(request.path == "/api/events")
        #expect(request.query == ["": "", "limit": "5", "topic": "sync.", "x": "last", "flag": ""])
        #expect(request.headers == ["host": "h"])
        #expect(try HTTPRequest.parse(head: Array("GET /a%2Fb?x=a+b%2Bc HTTP/1.0".utf8)[...]).query["x"] == "a b+c")
        #expect(HTTPRequest.parse("GET / HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 3000)) == nil)
    }
}
