import ArgumentParser
import NetplayService
import ZeroMQ

extension Netplayctl {
    /// `netplayctl keygen`: a new CurveZMQ key pair for encrypting a cluster.
    struct Keygen: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Generate a CurveZMQ key pair for the cluster (Z85).",
            discussion: "Give the secret key to every service as NETPLAY_CURVE_SECRET_KEY and the public key to clients as NETPLAY_CURVE_SERVER_KEY.")

        @Flag(help: "Print shell export lines.") var export = false

        func run() throws {
            guard Context.has("curve") else { throw ValidationError("this libzmq was built without CURVE support") }
            let keys = try CurveKeyPair.generate()
            if export {
                emit("export NETPLAY_CURVE_SECRET_KEY='\(keys.secretZ85)'")
                emit("export NETPLAY_CURVE_SERVER_KEY='\(keys.publicZ85)'")
            } else {
                emit("public: \(keys.publicZ85)")
                emit("secret: \(keys.secretZ85)")
            }
        }
    }
}
