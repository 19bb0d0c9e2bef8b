import ArgumentParser
import Foundation
import NetplayService

/// Where a cluster answers, for every command that talks to one (the playing subcommands and
/// `demo`): discovery, the coordinator and the cluster's CurveZMQ key, each with its `NETPLAY_*`
/// fallback, resolved and checked once.
struct ClusterEndpointOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Discovery endpoint (env NETPLAY_DISCOVERY, default \(ServiceDefaults.discoveryEndpoint)).", valueName: "endpoint"))
    var discovery: String?
    @Option(help: ArgumentHelp("Coordinator endpoint (env NETPLAY_COORDINATOR, default \(ServiceDefaults.coordinatorEndpoint)).", valueName: "endpoint"))
    var coordinator: String?
    @OptionGroup var curve: CurveClientOptions

    /// The endpoints and key these flags, the environment and the defaults name.
    struct Resolved {
        var discovery: String
        var coordinator: String
        /// nil: unencrypted.
        var serverKey: [UInt8]?
    }

    func resolve(environment: [String: String]) throws -> Resolved {
        let setting = SettingResolver(environment: environment)
        let resolved = Resolved(discovery: setting.text(discovery, "NETPLAY_DISCOVERY", default: ServiceDefaults.discoveryEndpoint),
                                coordinator: setting.text(coordinator, "NETPLAY_COORDINATOR", default: ServiceDefaults.coordinatorEndpoint),
                                serverKey: try curve.serverKey(environment: environment))
        try EndpointValidator.validate(resolved.discovery, name: "--discovery")
        try EndpointValidator.validate(resolved.coordinator, name: "--coordinator")
        return resolved
    }
}
