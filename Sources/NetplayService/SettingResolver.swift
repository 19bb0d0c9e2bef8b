import ArgumentParser
import Foundation
import Synchronization

/// Resolves one service setting from its flag, then its `NETPLAY_*` environment variable, then
/// a default, turning malformed values into a one-line `ValidationError` that names the flag.
/// Shared by every service's `*Options` (discovery, coordinator, sync, telemetry, supervisor).
public struct SettingResolver: Sendable {
    /// The environment consulted.
    public let environment: [String: String]

    /// Creates a resolver over `environment` (the process's by default).
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// The flag's text if given, else the variable's if set and non-empty. Every other reader
    /// comes through here, and so does every variable an options type consults.
    public func text(_ flag: String?, _ variable: String) -> String? {
        Self.consulted?.record(variable)
        if let flag { return flag }
        if let value = environment[variable], !value.isEmpty { return value }
        return nil
    }

    /// The flag's text, else the variable's, else `value`: a fixed default, recorded for the
    /// help contract (``settingsConsulted(during:)``) as the typed readers' defaults are.
    public func text(_ flag: String?, _ variable: String, default value: String) -> String {
        Self.consulted?.record(variable, default: value)
        return text(flag, variable) ?? value
    }

    /// Whether a switch is on: its flag, else the variable: 1, true, yes or on for on; 0, false,
    /// no, off or empty for off (any case). Anything else is a `ValidationError` naming the
    /// variable (`NETPLAY_NO_REPLAYS=y` used to mean off, silently).
    public func isOn(_ flag: Bool, _ variable: String) throws -> Bool {
        if flag { return true }
        let text = text(nil, variable)?.lowercased() ?? ""
        if ["1", "true", "yes", "on"].contains(text) { return true }
        if ["", "0", "false", "no", "off"].contains(text) { return false }
        throw ValidationError("\(variable) must be 1, true, yes or on, or 0, false, no or off; got '\(text.prefix(40))'")
    }

    /// A number within `range`.
    /// The flag may arrive as text or already parsed (`Double?`); either way it wins over the variable.
    public func number(_ flag: (some LosslessStringConvertible)?, _ variable: String, name: String, default value: Double,
                       range: ClosedRange<Double>) throws -> Double {
        Self.consulted?.record(variable, default: Self.format(value))
        guard let text = text(flag.map { String($0) }, variable) else { return value }
        guard let number = Double(text), number.isFinite, range.contains(number) else {
            throw ValidationError("\(name) must be a number from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound)), got '\(text)'")
        }
        return number
    }

    /// An integer within `range`.
    /// The flag may arrive as text or already parsed (`Int?`); either way it wins over the variable.
    public func integer(_ flag: (some LosslessStringConvertible)?, _ variable: String, name: String, default value: Int,
                        range: ClosedRange<Int>) throws -> Int {
        Self.consulted?.record(variable, default: String(value))
        guard let text = text(flag.map { String($0) }, variable) else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw ValidationError("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
        }
        return number
    }

    /// A UDP port; 0 or `none` disables (nil).
    public func port(_ flag: String?, _ variable: String, name: String, default value: UInt16?) throws -> UInt16? {
        Self.consulted?.record(variable, default: value.map { String($0) } ?? "none")
        guard let text = text(flag, variable) else { return value }
        if text.lowercased() == "none" || text == "0" { return nil }
        guard let port = UInt16(text), port > 0 else {
            throw ValidationError("\(name) must be a port from 1 to 65535, or 0/none to disable; got '\(text)'")
        }
        return port
    }

    /// An IPv4 address.
    public func ipv4(_ flag: String?, _ variable: String, name: String, default value: String) throws -> String {
        Self.consulted?.record(variable, default: value)
        guard let text = text(flag, variable) else { return value }
        var parsed = in_addr()
        guard inet_pton(AF_INET, text, &parsed) == 1 else {
            throw ValidationError("\(name) must be an IPv4 address such as 0.0.0.0, got '\(text)'")
        }
        return text
    }

    /// An endpoint `none` switches off (nil); any other text must be a valid endpoint
    /// (``EndpointValidator``). A nil default leaves it off unless set.
    public func endpoint(_ flag: String?, _ variable: String, name: String, default value: String?) throws -> String? {
        if let value { Self.consulted?.record(variable, default: value) }
        guard let text = text(flag, variable) ?? value, text.lowercased() != "none" else { return nil }
        try EndpointValidator.validate(text, name: name)
        return text
    }

    /// One of `choices`.
    public func choice(_ flag: String?, _ variable: String, name: String, default value: String,
                       choices: [String]) throws -> String {
        Self.consulted?.record(variable, default: value)
        guard let text = text(flag, variable)?.lowercased() else { return value }
        guard choices.contains(text) else {
            throw ValidationError("\(name) must be one of \(choices.joined(separator: ", ")), got '\(text)'")
        }
        return text
    }

    /// What resolvers consulted while ``settingsConsulted(during:)`` ran.
    public struct Consulted: Sendable {
        /// Every variable consulted, whether set or not: what an options type reads, which its
        /// `--help` must name.
        public var variables: Set<String>
        /// The fixed default each consulted variable falls back to, as `--help` writes it (`60`,
        /// not `60.0`; a disabled port `none`); settings whose default is worked out at run time
        /// have none. What `--help` says of its defaults must agree.
        public var defaults: [String: Set<String>]
    }

    /// Runs `body` and returns, beside its result, what resolvers consulted meanwhile on this
    /// task (each service's tests hold its `--help` to it).
    public static func settingsConsulted<Result>(during body: () throws -> Result) rethrows -> (Result, Consulted) {
        let record = ConsultedVariables()
        let result = try $consulted.withValue(record) { try body() }
        return (result, Consulted(variables: record.names, defaults: record.defaults))
    }

    /// Where ``settingsConsulted(during:)`` collects, for the task that asked.
    @TaskLocal static var consulted: ConsultedVariables?

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

/// The variable names resolvers consulted, and their fixed defaults, while
/// ``SettingResolver/settingsConsulted(during:)`` ran.
final class ConsultedVariables: Sendable {
    private let storage = Mutex<(names: Set<String>, defaults: [String: Set<String>])>(([], [:]))
    func record(_ name: String) { _ = storage.withLock { $0.names.insert(name) } }
    func record(_ name: String, default value: String) { _ = storage.withLock { $0.defaults[name, default: []].insert(value) } }
    var names: Set<String> { storage.withLock { $0.names } }
    var defaults: [String: Set<String>] { storage.withLock { $0.defaults } }
}
