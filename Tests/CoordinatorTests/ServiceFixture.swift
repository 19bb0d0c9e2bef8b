@testable import Coordinator
import Foundation
import NetplayTestSupport
import NetplayAuth
import NetplayService
import NetplayWire
import Testing

/// A coordinator service started in-process on a loopback port.
final class ServiceFixture {
    let running: RunningService
    let directory: URL
    private let made = Made()

    /// The service the host made, read only on its reactor thread (``onReactor(_:)``).
    private final class Made: @unchecked Sendable {
        var service: CoordinatorService?
    }

    /// What `read` returned, handed from the reactor thread to the waiting test.
    private final class Answer<T>: @unchecked Sendable {
        var value: T?
    }

    init(settings: CoordinatorSettings) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("coordinator-service-\(UUID().uuidString)")
        var configuration = CoordinatorConfiguration()
        configuration.discovery = nil
        configuration.settings = settings
        configuration.keyRing = testKeys
        let configured = configuration
        running = try ServiceHost.start(configuration: ServiceConfiguration(
            kind: "coordinator", instance: "test-coordinator", endpoint: "tcp://127.0.0.1:*", dataDirectory: directory)) { [made] in
            let service = CoordinatorService(configuration: configured)
            made.service = service
            return service
        }
    }

    var endpoint: String { running.endpoint }

    /// Runs `read` with the service's core on its reactor thread, between requests, and returns
    /// what it found.
    func onReactor<T>(_ read: @escaping @Sendable (SessionCoordinator?) -> T) -> T? {
        let answer = Answer<T>()
        let done = DispatchSemaphore(value: 0)
        running.handle.enqueue { [made] _ in
            answer.value = read(made.service?.core)
            done.signal()
        }
        done.wait()
        return answer.value
    }

    /// A LAN session (no relay needed) with a play password.
    func createLanSession(_ client: BlockingClient, password: String) throws -> String {
        let settings = SessionSettings(roomName: "room", content: smb, transport: .lan, lanEndpoint: "tcp://10.0.0.2:7300",
                                       maxPlayers: 8, playPassword: password)
        guard case .createSessionResponse(let created) = try client.request(.createSessionRequest(CreateSessionRequest(
            settings: settings, hostName: "alice"))) else { throw HarnessFailure("create failed") }
        return created.session.sessionId
    }

    func stop() {
        running.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
