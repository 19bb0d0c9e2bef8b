import ArgumentParser
import Foundation
import NetplayService

/// Holds an options type's `--help` to what its resolution reads: every `NETPLAY_*` variable the
/// help names is consulted, and every variable consulted is named. Each service's tests run it on
/// their own options, so a renamed variable or a help text left behind fails there.
public struct EnvironmentContract {
    /// The variables the help screens name.
    public let named: Set<String>
    /// The variables the resolution consulted, over every environment tried.
    public let read: Set<String>
    /// Where the help's "(env NETPLAY_X, default D" (or "default 'D E'") disagrees with the default the resolution
    /// falls back to for that variable (one line each); settings whose default is worked out
    /// (`<data-dir>/…`, per service) are not compared.
    public let defaultsDisagreeing: [String]

    /// Reads the help of each of `options` (unwrapped, so no name is split across lines) and runs
    /// `resolve` once per environment, recording what it consults even when it throws (a missing
    /// secret ends some resolutions early; the environments that follow supply it).
    public init(help options: [any ParsableArguments.Type], environments: [[String: String]] = [[:]],
                resolve: ([String: String]) throws -> Void) {
        var named: Set<String> = []
        var stated: [String: String] = [:]
        for type in options {
            let help = type.helpMessage(includeHidden: true, columns: 100_000)
            for match in help.matches(of: /NETPLAY_[A-Z0-9_]+/) { named.insert(String(match.output)) }
            // A default with spaces is quoted: "default 'netplay-peer room'".
            for match in help.matches(of: /env (NETPLAY_[A-Z0-9_]+), default (?:'([^']*)'|([^,;)\s]+))/) {
                stated[String(match.output.1)] = String(match.output.2 ?? match.output.3 ?? "")
            }
        }
        var read: Set<String> = []
        var defaults: [String: Set<String>] = [:]
        for environment in environments {
            let (_, consulted) = SettingResolver.settingsConsulted { try? resolve(environment) }
            read.formUnion(consulted.variables)
            defaults.merge(consulted.defaults) { $0.union($1) }
        }
        self.named = named
        self.read = read
        defaultsDisagreeing = stated.keys.sorted().compactMap { variable in
            guard let actual = defaults[variable], let said = stated[variable],
                  !actual.contains(where: { $0.lowercased() == said.lowercased() }) else { return nil }
            return "\(variable): --help says default \(said), the code falls back to \(actual.sorted().joined(separator: " or "))"
        }
    }

    /// Named in the help but never consulted (the help promises what the code ignores).
    public var namedButNotRead: Set<String> { named.subtracting(read) }
    /// Consulted but named nowhere in the help (a variable an operator cannot discover).
    public var readButNotNamed: Set<String> { read.subtracting(named) }
}
