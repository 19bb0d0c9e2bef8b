import ArgumentParser
import Foundation
import ZeroMQ

/// The flag every client of a CurveZMQ-encrypted cluster takes (netplayctl, netplay-peer):
/// the cluster's public key. Include it with `@OptionGroup var curve: CurveClientOptions` and
/// read the key with ``serverKey(environment:)``.
///
/// Resolution order: `--curve-server-key`, then `NETPLAY_CURVE_SERVER_KEY`, then the public half
/// of `NETPLAY_CURVE_SECRET_KEY` (an operator's shell that runs the services already has it);
/// none of them: plain connections.
public struct CurveClientOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("Server's CurveZMQ public key, Z85 (env NETPLAY_CURVE_SERVER_KEY; derived from NETPLAY_CURVE_SECRET_KEY when set).", valueName: "z85"))
    public var curveServerKey: String?

    public init() {}

    /// The cluster's public key (32 bytes), or nil when none is configured. A malformed key
    /// throws a one-line `ValidationError` naming the flag or variable it came from.
    public func serverKey(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [UInt8]? {
        try Self.serverKey(flag: curveServerKey, environment: environment)
    }

    /// ``serverKey(environment:)`` for a flag value read elsewhere.
    public static func serverKey(flag: String?, environment: [String: String]) throws -> [UInt8]? {
        let setting = SettingResolver(environment: environment)
        if let text = setting.text(flag, "NETPLAY_CURVE_SERVER_KEY") {
            return try publicKey(text, source: flag == nil ? "NETPLAY_CURVE_SERVER_KEY" : "--curve-server-key")
        }
        if let secret = setting.text(nil, "NETPLAY_CURVE_SECRET_KEY") {
            guard let pair = try? CurveKeyPair(secretZ85: secret) else {
                throw ValidationError("NETPLAY_CURVE_SECRET_KEY must be a 40-character Z85 secret key")
            }
            return pair.publicKey
        }
        return nil
    }

    private static func publicKey(_ text: String, source: String) throws -> [UInt8] {
        guard let key = Z85.decode(text), key.count == 32 else {
            throw ValidationError("\(source) must be a 40-character Z85 public key")
        }
        return key
    }
}
