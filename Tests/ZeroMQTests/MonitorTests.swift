import Testing
@testable import ZeroMQ
import NetplayTestSupport

@Suite("Socket monitor", .ownThread)
struct MonitorTests {
    @Test func reportsListeningAcceptedAndDisconnected() throws {
        let server = try Context.shared.socket(.router)
        let monitor = try server.monitor()
        let endpoint = try bindEphemeral(server)
        var client: Socket? = try Context.shared.socket(.dealer)
        try client!.set(.linger(milliseconds: 0))
        try client!.connect(endpoint)
        var kinds: [MonitorEvent.Kind] = []
        while kinds.count < 20, let event = try monitor.next(timeout: 1000) {
            kinds.append(event.kind)
            if event.kind == .handshakeSucceeded { break }
        }
        #expect(kinds.contains(.listening))
        #expect(kinds.contains(.accepted))
        client = nil
        var disconnected = false
        while let event = try monitor.next(timeout: 2000) {
            if event.kind == .disconnected { disconnected = true; break }
        }
        #expect(disconnected)
        #expect(client == nil)
    }
}
