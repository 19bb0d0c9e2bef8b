import Foundation
import Logging
import NetplayService

/// Why a request head was refused: the status to answer and a one-line reason.
public struct HTTPRequestError: Error, Equatable, Sendable {
    /// 400 (malformed) or 431 (head too large).
    public var status: Int
    /// What was wrong, for the error body.
    public var message: String

    /// Creates an error.
    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    static func bad(_ message: String) -> HTTPRequestError { HTTPRequestError(400, message) }
}

/// An HTTP request as the telemetry server sees it (GET and HEAD only).
public struct HTTPRequest: Sendable, Equatable {
    /// The method, e.g. `GET` (anything but `GET` and `HEAD` is answered 405 before reaching a handler).
    public var method: String
    /// The path without the query, percent-decoded.
    public var path: String
    /// Query parameters, percent-decoded with `+` as space (last value wins; `?=` is the empty key).
    public var query: [String: String]
    /// Header fields, lower-cased names (last value wins).
    public var headers: [String: String]

    /// Largest request head accepted, in bytes.
    public static let maxHeadBytes = 16_384
    /// Most header lines accepted.
    public static let maxHeaders = 100
    /// Most query parameters accepted.
    public static let maxQueryParameters = 64

    /// Parses a request head given as text (see ``parse(head:)``); nil when it is malformed.
    public static func parse(_ head: String) -> HTTPRequest? {
        try? parse(head: Array(head.utf8)[...])
    }

    /// Parses a request head: the bytes before the blank line that ends it (the request line and
    /// the header lines, separated by CRLF). A pure function that never traps, whatever the
    /// bytes: anything that is not a well-formed HTTP/1.0 or 1.1 origin-form request is refused
    /// with 400 (431 when the head is too large).
    public static func parse(head: ArraySlice<UInt8>) throws(HTTPRequestError) -> HTTPRequest {
        guard head.count <= maxHeadBytes else { throw HTTPRequestError(431, "request head larger than \(maxHeadBytes) bytes") }
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            let byte = head[index]
            if byte == 13 {
                let next = head.index(after: index)
                guard next < head.endIndex, head[next] == 10 else { throw .bad("bare CR in the request head") }
                lines.append(head[lineStart..<index])
                index = head.index(after: next)
                lineStart = index
                continue
            }
            if byte == 10 { throw .bad("bare LF in the request head") }
            index = head.index(after: index)
        }
        lines.append(head[lineStart..<head.endIndex])
        guard lines.count - 1 <= maxHeaders else { throw HTTPRequestError(431, "more than \(maxHeaders) header lines") }

        // Request line: METHOD SP TARGET SP VERSION.
        let requestLine = lines[0]
        let parts = requestLine.split(separator: 32, maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .bad("the request line must be METHOD TARGET VERSION") }
        let method = parts[0], target = parts[1], version = parts[2]
        guard !method.isEmpty, method.count <= 32, method.allSatisfy(isTokenByte) else { throw .bad("malformed method") }
        guard version.elementsEqual("HTTP/1.1".utf8) || version.elementsEqual("HTTP/1.0".utf8) else {
            throw .bad("only HTTP/1.0 and HTTP/1.1 are supported")
        }
        guard target.first == UInt8(ascii: "/") else { throw .bad("the request target must be a path starting with /") }
        guard target.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "#") }) else {
            throw .bad("the request target holds a character that must be percent-encoded")
        }
        let question = target.firstIndex(of: UInt8(ascii: "?"))
        let rawPath = target[target.startIndex..<(question ?? target.endIndex)]
        guard let path = decode(rawPath, plusIsSpace: false) else { throw .bad("the path has a bad percent-encoding or is not UTF-8") }

        var query: [String: String] = [:]
        if let question {
            let rawQuery = target[target.index(after: question)...]
            var count = 0
            for pair in rawQuery.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
                count += 1
                guard count <= maxQueryParameters else { throw .bad("more than \(maxQueryParameters) query parameters") }
                let equals = pair.firstIndex(of: UInt8(ascii: "="))
                let rawKey = pair[pair.startIndex..<(equals ?? pair.endIndex)]
                let rawValue = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
                guard let key = decode(rawKey, plusIsSpace: true), let value = decode(rawValue, plusIsSpace: true) else {
                    throw .bad("a query parameter has a bad percent-encoding or is not UTF-8")
                }
                query[key] = value
            }
        }

        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let first = line.first else { throw .bad("empty line inside the request head") }
            guard first != 32, first != 9 else { throw .bad("folded header lines are not supported") }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .bad("a header line has no colon") }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { throw .bad("malformed header name") }
            var value = line[line.index(after: colon)...]
            guard value.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else { throw .bad("a header value holds a control character") }
            while let byte = value.first, byte == 32 || byte == 9 { value = value.dropFirst() }
            while let byte = value.last, byte == 32 || byte == 9 { value = value.dropLast() }
            headers[String(decoding: name, as: UTF8.self).lowercased()] = String(decoding: value, as: UTF8.self)
        }
        return HTTPRequest(method: String(decoding: method, as: UTF8.self), path: path, query: query, headers: headers)
    }

    /// RFC 9110 `tchar`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Percent-decodes `bytes`; nil on a bad escape, invalid UTF-8 or a decoded control character.
    static func decode(_ bytes: ArraySlice<UInt8>, plusIsSpace: Bool) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard bytes.distance(from: index, to: bytes.endIndex) >= 3,
                      let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) else { return nil }
                out.append(high << 4 | low)
                index += 3
                continue
            }
            out.append(plusIsSpace && byte == UInt8(ascii: "+") ? 32 : byte)
            index += 1
        }
        guard !out.contains(where: { $0 < 32 || $0 == 127 }) else { return nil }
        let text = String(decoding: out, as: UTF8.self)
        guard text.utf8.elementsEqual(out) else { return nil }  // replacement characters: not UTF-8
        return text
    }
}
