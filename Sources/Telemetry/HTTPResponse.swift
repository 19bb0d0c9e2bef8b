import Foundation
import Logging
import MemberwiseInit
import NetplayService

/// An HTTP response.
@PublicMemberwiseInit
public struct HTTPResponse: Sendable {
    /// Status code.
    public var status: Int = 200
    /// Content-Type.
    public var contentType: String
    /// Body bytes.
    public var body: [UInt8]
    /// Extra header lines (`Name: value`).
    public var headers: [String] = []

    /// A text response.
    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> HTTPResponse {
        HTTPResponse(status: status, contentType: contentType, body: Array(text.utf8))
    }

    /// A JSON response.
    public static func json(_ value: JSONValue, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", body: Array(value.rendered().utf8))
    }

    /// A JSON error: `{"error": "..."}`.
    public static func error(_ status: Int, _ message: String) -> HTTPResponse {
        .json(["error": .string(message), "status": .number(status)], status: status)
    }

    /// The status line and headers, and the body (none for HEAD): apart, so that connections
    /// sent one page share its bytes (an array is copied only when written to) instead of each
    /// holding a copy joined to its head.
    func serialized(headOnly: Bool) -> (head: [UInt8], body: [UInt8]) {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        head += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        head += "Cache-Control: no-store\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n"
        for header in headers { head += header + "\r\n" }
        head += "\r\n"
        return (Array(head.utf8), headOnly ? [] : body)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }
}

/// Connection limits of an ``HTTPServer``.
public struct HTTPLimits: Sendable {
    /// Most connections open at once; a new one evicts the oldest still waiting for its head.
    public var maxConnections: Int
    /// Most connections open at once from one peer address; a new one evicts that address's
    /// oldest connection still waiting for its head.
    public var maxPerAddress: Int
    /// Seconds a connection has to deliver its complete request head.
    public var headTimeout: Double
    /// Seconds a connection has, after its head, to take its response.
    public var responseTimeout: Double

    /// Creates limits.
    public init(maxConnections: Int = 128, maxPerAddress: Int = 16, headTimeout: Double = 5, responseTimeout: Double = 10) {
        self.maxConnections = max(1, maxConnections)
        self.maxPerAddress = max(1, maxPerAddress)
        self.headTimeout = headTimeout
        self.responseTimeout = responseTimeout
    }
}
