import Foundation
import MemberwiseInit

/// How a relay's RetroArch tunnel listener runs: where it listens, what it tells clients, and its
/// limits. Every limit is configurable; the defaults are at least the official tunnel server's.
@PublicMemberwiseInit
public struct TunnelConfiguration: Sendable, Equatable {
    /// The TCP port RetroArch hosts and clients connect to (RetroArch's default relay port is 55435).
    public var port: UInt16 = 55435
    /// The address the listener binds ("0.0.0.0": every interface).
    public var bindHost: String = "0.0.0.0"
    /// The host name or address written into join strings ("HOST|PORT|SESSIONID"): what clients
    /// can reach.
    public var advertiseHost: String = "127.0.0.1"
    /// The port written into join strings (0: `port`), for a relay behind a port mapping.
    public var advertisePort: UInt16 = 0
    /// Plain per-session ports: each new session gets a free port of this range, where a client
    /// joins with only an address and a port. Nil: none.
    public var sessionPorts: ClosedRange<UInt16>? = nil
    /// Sessions at most (a host asking for one more is closed).
    public var maxSessions: Int = 1_000
    /// Sessions hosted from one address at most: a few addresses cannot hold every session
    /// (and fill the lobby with rooms), while hosts behind one shared address still fit.
    public var maxSessionsPerAddress: Int = 16
    /// Clients linked or waiting in one session at most.
    public var maxClientsPerSession: Int = 32
    /// Clients waiting for their link in one session at most (RetroArch's host keeps 8).
    public var maxPendingLinks: Int = 8
    /// Connections of every kind at most.
    public var maxConnections: Int = 8_192
    /// Connections from one address at most: one source cannot hold every place (a host takes
    /// one per client plus its control connection, so a LAN party behind one address fits).
    public var maxConnectionsPerAddress: Int = 256
    /// Seconds a new connection has to send its 16-byte prefix.
    public var prefixTimeoutSeconds: Double = 10
    /// Seconds a client waits for the host to open its link (RetroArch's host gives up after 15).
    public var linkTimeoutSeconds: Double = 30
    /// Seconds between the relay's RATP pings to a host.
    public var pingIntervalSeconds: Double = 10
    /// Seconds a host's control connection may stay silent (no ping echo) before its session ends.
    public var hostTimeoutSeconds: Double = 240
    /// Bytes a waiting client may send before its link exists (RetroArch's client sends its
    /// header, then waits for the host's: tens of bytes). Small, so one address, within its
    /// connections, holds a small share of ``maxBufferedTotalBytes``.
    public var maxBufferedBytes: Int = 8 << 10
    /// Bytes all waiting clients together may hold (each within ``maxBufferedBytes``): the
    /// relay's memory for strangers stays bounded whatever the number of sessions and addresses.
    public var maxBufferedTotalBytes: Int = 16 << 20

    /// The port join strings name.
    public var joinPort: UInt16 { advertisePort == 0 ? port : advertisePort }

    /// The join string of `session`: "HOST|PORT|SESSIONID".
    public func join(_ session: TunnelID) -> String {
        "\(advertiseHost)|\(joinPort)|\(session.base64)"
    }

    /// Parses a port range "LOW-HIGH" (or one port); nil when malformed.
    public static func parsePortRange(_ text: String) -> ClosedRange<UInt16>? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard (1...2).contains(parts.count), let low = UInt16(parts[0]), low > 0 else { return nil }
        guard parts.count == 2 else { return low...low }
        guard let high = UInt16(parts[1]), high >= low else { return nil }
        return low...high
    }

    /// The host of a ZeroMQ endpoint ("tcp://HOST:PORT") clients can reach: a wildcard or an
    /// unspecified address becomes 127.0.0.1.
    public static func reachableHost(ofEndpoint endpoint: String) -> String {
        var rest = Substring(endpoint)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        if let colon = rest.lastIndex(of: ":") { rest = rest[..<colon] }
        let host = rest.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return ["", "*", "0.0.0.0", "::"].contains(host) ? "127.0.0.1" : host
    }

    /// A malformed `--retroarch-limits` value.
    public struct LimitsError: Error, CustomStringConvertible {
        /// The one-line reason.
        public let description: String
    }

    /// Applies "name=value,..." limits (sessions, sessions-per-address, clients, pending, connections, per-address, prefix-timeout,
    /// link-timeout, ping-interval, host-timeout in seconds, buffer and buffer-total in bytes).
    public mutating func applyLimits(_ text: String) throws(LimitsError) {
        for item in text.split(separator: ",") {
            let pair = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, let value = Double(pair[1]), value > 0, value.isFinite else {
                throw LimitsError(description: "expected name=value with a positive number, got '\(item)'")
            }
            func seconds() throws(LimitsError) -> Double {
                guard value <= 86_400 else {  // and past it, milliseconds summed with a clock overflowed: a trap
                    throw LimitsError(description: "\(pair[0]) must be at most 86400 seconds, got '\(pair[1])'")
                }
                return value
            }
            func whole() throws(LimitsError) -> Int {
                guard value == value.rounded(), value <= 1e9 else {
                    throw LimitsError(description: "\(pair[0]) must be a whole number, got '\(pair[1])'")
                }
                return Int(value)
            }
            switch pair[0] {
            case "sessions": maxSessions = try whole()
            case "sessions-per-address": maxSessionsPerAddress = try whole()
            case "clients": maxClientsPerSession = try whole()
            case "pending": maxPendingLinks = try whole()
            case "connections": maxConnections = try whole()
            case "per-address": maxConnectionsPerAddress = try whole()
            case "buffer": maxBufferedBytes = try whole()
            case "buffer-total": maxBufferedTotalBytes = try whole()
            case "prefix-timeout": prefixTimeoutSeconds = try seconds()
            case "link-timeout": linkTimeoutSeconds = try seconds()
            case "ping-interval": pingIntervalSeconds = try seconds()
            case "host-timeout": hostTimeoutSeconds = try seconds()
            default:
                throw LimitsError(description: "unknown limit '\(pair[0])' (sessions, sessions-per-address, clients, pending, connections, per-address, buffer, buffer-total, prefix-timeout, link-timeout, ping-interval, host-timeout)")
            }
        }
        if hostTimeoutSeconds <= pingIntervalSeconds {
            throw LimitsError(description: "host-timeout (\(hostTimeoutSeconds) s) must be longer than ping-interval (\(pingIntervalSeconds) s)")
        }
    }
}
