import ArgumentParser
import Foundation
import NetplayService
import NetplayWire

/// A minimal service on the shared runtime, used by the runtime's end-to-end tests as a real
/// process: it answers Health, Introspect and Ping (from the runtime), counts the requests it
/// handles, withdraws rooms from a toy in-memory set (publishing `rooms.removed`), and can be
/// told to take a while to drain so graceful shutdown is observable.
final class SampleService: Service {
    private var rooms: Set<String>
    private var handled = 0
    private let drainMilliseconds: Int
    private var drainUntil: ContinuousClock.Instant?

    init(rooms: [String], drainMilliseconds: Int) {
        self.rooms = Set(rooms)
        self.drainMilliseconds = drainMilliseconds
    }

    func start(runtime: ServiceRuntime) throws {
        runtime.logger.info("sample service started", metadata: ["rooms": "\(rooms.count)"])
    }

    func handle(_ request: Request, runtime: ServiceRuntime) throws(ServiceError) -> HandlerOutcome {
        handled += 1
        switch request.body {
        case .getRoomRequest(let get):
            guard rooms.contains(get.roomId) else { throw ServiceError(.notFound, "No room '\(get.roomId)'.") }
            return .reply(.getRoomResponse(GetRoomResponse(room: Room(roomId: get.roomId))))
        case .withdrawRoomRequest(let withdraw):
            let removed = rooms.remove(withdraw.roomId) != nil
            if removed {
                runtime.emit(topic: "rooms.removed", .roomRemoved(RoomRemoved(roomId: withdraw.roomId, reason: .withdrawn)),
                             message: "room \(withdraw.roomId) withdrawn")
            }
            return .reply(.withdrawRoomResponse(WithdrawRoomResponse(roomId: withdraw.roomId, removed: removed)))
        case .leaveSessionRequest(let leave):
            // The public twin of a withdrawal: tests trigger events without credentials.
            let removed = rooms.remove(leave.sessionId) != nil
            if removed {
                runtime.emit(topic: "rooms.removed", .roomRemoved(RoomRemoved(roomId: leave.sessionId, reason: .withdrawn)),
                             message: "room \(leave.sessionId) withdrawn")
            }
            return .reply(.ack(Ack()))
        default:
            throw ServiceError(.unknownRequest, "The sample service does not handle \(request.body.name).")
        }
    }

    func introspect(section: String) -> JSONValue {
        ["rooms": .array(rooms.sorted().map(JSONValue.string)), "handled": .number(handled)]
    }

    func drain(runtime: ServiceRuntime) {
        drainUntil = .now + .milliseconds(drainMilliseconds)
    }

    var isDraining: Bool { drainUntil.map { ContinuousClock.now < $0 } ?? false }
}

@main
struct SampleServiceCommand: NetplayCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplay-sample-service",
        abstract: "A minimal service on the Netplay runtime (test fixture).")

    @OptionGroup var common: ServiceOptions
    @Option(help: "Room ids the toy registry starts with.") var room: [String] = []
    @Option(help: "Milliseconds the service keeps draining after a stop signal.") var drainMs = 0

    func run() throws {
        let configuration = try common.resolve(defaults: ServiceDefaults(kind: "sample", endpoint: "tcp://127.0.0.1:7900", events: "tcp://127.0.0.1:7901"))
        try ServiceHost.runMain(configuration: configuration) {
            SampleService(rooms: room, drainMilliseconds: drainMs)
        }
    }
}
