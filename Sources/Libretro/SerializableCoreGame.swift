import Rollback
import Synchronization

/// A libretro core as a netplay game: a ``LibretroGame`` plus the state coding that state
/// transfers (desync healing, late join, spectators) and replays need. A state is the core's
/// serialization; one from the network decodes only when it has this core's state size, or any
/// size up to 256 MiB for a core whose states vary (a process runs one core: the size is kept
/// process-wide, since decoding happens without the core). A state that decodes may still be
/// refused by the core: ``loadForeignState(_:)`` throws then.
public struct SerializableCoreGame: SerializableGame {
    /// A serialized core state.
    public struct State: Sendable, Hashable {
        /// The core's serialization.
        public let bytes: [UInt8]
    }

    /// The state sizes of the one core this process runs (decoding happens without the core):
    /// its size, or any up to ``LibretroCore/maximumStateSize`` for a core whose states vary in
    /// size (its quirks say so), whose transfers of another size than the first were refused.
    private static let expectedStateSize = Mutex<Int?>(nil)
    private static let anyStateSize = 0

    /// The core as a rollback game.
    public var game: LibretroGame

    /// Wraps `game` (and records its core's state size for decoding).
    public init(game: LibretroGame) {
        self.game = game
        let variable = game.core.environment.quirks.contains(.coreVariableSize)
        Self.expectedStateSize.withLock { $0 = variable ? Self.anyStateSize : game.core.stateSize }
    }

    public func saveState() -> State { State(bytes: game.saveState().bytes) }

    public mutating func loadState(_ state: State) {
        do {
            try game.core.loadState(game.core.state(from: state.bytes))
        } catch {
            fatalError("libretro host: cannot load a state: \(error)")
        }
    }

    /// A state from elsewhere: one the core refuses (`retro_unserialize` fails on a corrupt or
    /// foreign serialization of the right size) throws, and the core gets back the state it had,
    /// which a refusal may have half overwritten.
    public mutating func loadForeignState(_ state: State) throws {
        let core = game.core
        let before = try core.saveState()
        do {
            try core.loadState(core.state(from: state.bytes))
        } catch {
            try? core.loadState(before)
            throw error
        }
    }

    public mutating func advanceFrame(_ inputs: FrameInputs) { game.advanceFrame(inputs) }
    public func checksum() -> UInt64 { game.checksum() }

    public static func encode(_ state: State) -> [UInt8] { state.bytes }

    public static func decode(_ bytes: [UInt8]) -> State? {
        guard let size = expectedStateSize.withLock({ $0 }) else { return nil }
        if size == anyStateSize {
            guard (1 ... LibretroCore.maximumStateSize).contains(bytes.count) else { return nil }
        } else {
            guard bytes.count == size else { return nil }
        }
        return State(bytes: bytes)
    }
}
