import CNetplayAPI
import Rollback

/// The frontend's game as NetplayKit sees it: a ``SerializableGame`` whose state is the bytes
/// the `save` callback writes, stepped by the `advance` callback. Copies share one
/// ``GameCallbacks`` (the engine copies games freely).
struct CallbackGame: SerializableGame {
    /// The callbacks and what they reported.
    let callbacks: GameCallbacks

    func saveState() -> [UInt8] { callbacks.save() }
    mutating func loadState(_ state: [UInt8]) { callbacks.load(state) }
    mutating func advanceFrame(_ inputs: FrameInputs) { callbacks.advance(inputs) }
    func checksum() -> UInt64 { callbacks.checksum() }

    /// The largest state a peer may send (64 MiB; the frontend's `load` checks the rest).
    static let maxStateSize = 64 << 20

    static func encode(_ state: [UInt8]) -> [UInt8] { state }

    /// Any non-empty state up to ``maxStateSize``: decoding happens without the frontend; a
    /// state its `load` refuses ends the match with NP_ERR_GAME.
    static func decode(_ bytes: [UInt8]) -> [UInt8]? {
        bytes.isEmpty || bytes.count > maxStateSize ? nil : bytes
    }
}

/// A copy of the frontend's ``np_game_callbacks`` and the buffers passed to them. A callback
/// that fails sets ``failure``; from then on no callback runs (the match is being left).
/// Used only from the thread ticking the match (the C API's contract), hence unchecked.
final class GameCallbacks: @unchecked Sendable {
    private let raw: np_game_callbacks
    /// Bytes of each player's input: the session's (set from the match before each tick).
    var inputSize = 0
    /// Why a callback failed, once one did.
    private(set) var failure: String?
    private var inputs: [UInt8] = []
    private var statuses: [UInt8] = []

    /// Checks that the required callbacks are there.
    init(_ raw: UnsafePointer<np_game_callbacks>?) throws(CAPIFailure) {
        guard let raw = raw?.pointee else { throw .invalid("game (np_game_callbacks) is NULL") }
        guard raw.state_size != nil, raw.save != nil, raw.load != nil, raw.advance != nil else {
            throw .invalid("np_game_callbacks needs state_size, save, load and advance (checksum may be NULL)")
        }
        self.raw = raw
    }

    /// No callback runs from now on (`why` is reported as the failure).
    func stop(_ why: String) {
        if failure == nil { failure = why }
    }

    private func fail(_ why: String) -> [UInt8] {
        if failure == nil { failure = why }
        return []
    }

    func save() -> [UInt8] {
        guard failure == nil, let stateSize = raw.state_size, let save = raw.save else { return [] }
        let size = stateSize(raw.user)
        guard size > 0, size <= CallbackGame.maxStateSize else {
            return fail("state_size returned \(size) (must be 1 ... \(CallbackGame.maxStateSize))")
        }
        var status: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            buffer.initialize(repeating: 0)
            status = save(raw.user, buffer.baseAddress, size)
            count = size
        }
        return status == 0 ? bytes : fail("save returned \(status)")
    }

    func load(_ state: [UInt8]) {
        guard failure == nil, let load = raw.load else { return }
        let status = state.withUnsafeBufferPointer { load(raw.user, $0.baseAddress, $0.count) }
        if status != 0 { _ = fail("load returned \(status) for a \(state.count)-byte state") }
    }

    func advance(_ frame: FrameInputs) {
        guard failure == nil, let advance = raw.advance else { return }
        let players = frame.count
        if inputs.count != players * inputSize { inputs = [UInt8](repeating: 0, count: players * inputSize) }
        if statuses.count != players { statuses = [UInt8](repeating: 0, count: players) }
        for player in 0 ..< players {
            let input = frame[player]
            for index in 0 ..< inputSize { inputs[player * inputSize + index] = input[byte: index] }
            statuses[player] = frame.status(of: player).rawValue
        }
        let resimulating: Int32 = frame.isResimulating ? 1 : 0
        inputs.withUnsafeBufferPointer { input in
            statuses.withUnsafeBufferPointer { status in
                advance(raw.user, input.baseAddress, inputSize, Int32(players), status.baseAddress, resimulating)
            }
        }
    }

    func checksum() -> UInt64 {
        guard failure == nil else { return 0 }
        if let checksum = raw.checksum { return checksum(raw.user) }
        let state = save()
        return state.withUnsafeBytes { np_hash_bytes($0.baseAddress, $0.count) }
    }
}
