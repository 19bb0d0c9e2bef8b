import Rollback

/// A libretro core as a rollback ``Game``: the engine's sessions (sync test, P2P, spectator)
/// run it like any other game.
///
/// **Inputs.** Each player sends ``inputLayout``'s size of bytes per frame. With
/// ``LibretroInputLayout/joypad`` (2 bytes, ``inputSize``) that is the 16 bits of a
/// ``JoypadButtons`` mask, little-endian, so bit `i` of the input is libretro joypad button id
/// `i` (byte 0: B, Y, Select, Start, Up, Down, Left, Right; byte 1: A, X, L, R, L2, R2, L3, R3);
/// ``LibretroInputLayout/joypadAnalog`` (10 bytes) adds the two analog sticks (see
/// ``LibretroPadInput``). Player `p` drives controller port `p`; a disconnected player's input is
/// all zero (nothing pressed, sticks centred). Configure sessions with
/// `SessionConfiguration(playerCount:inputSize: game.inputLayout.inputSize)`.
///
/// **Re-simulated frames.** While the engine re-simulates a frame during a rollback
/// (`FrameInputs.isResimulating`), ``LibretroCore/presentsOutput`` is off: the core learns
/// through `RETRO_ENVIRONMENT_GET_AUDIO_VIDEO_ENABLE` that its video and audio will not be shown
/// and ``LibretroCore/hiddenVideoFrameCount`` counts the frames a frontend would skip.
///
/// **States.** A state is the core's `retro_serialize` output (``LibretroState``); the
/// checksum is a 64-bit hash of it. Saving and checksumming the same frame serialize once.
///
/// **Buttons outside the state.** Some cores keep part of their input handling outside their
/// saved state: nestopia maps X and Y to turbo A and B, whose on/off phase is a counter in the
/// core's frontend code that `retro_serialize` does not save, so a rollback changes what turbo
/// does next and peers desync. Pass a ``buttonMask`` without such buttons (for nestopia
/// ``JoypadButtons/nes``); masked buttons never reach the core.
///
/// **Same start everywhere.** A freshly loaded core is not always in the same state in every
/// process or instance (nestopia leaves a byte of its APU state uninitialised), so every peer
/// must start from one peer's initial state: send `try core.saveState().bytes` and its
/// checksum, and load them on the others with
/// `try core.loadState(core.state(from: bytes, expectedChecksum: checksum))` before the session starts.
///
/// `LibretroGame` is a handle: copies share the one ``LibretroCore``. The `Game` requirements
/// cannot throw, so a core that fails to save or load a state it made itself stops the
/// process with the core's error (running on would silently desync). States from elsewhere
/// go through ``LibretroCore/state(from:expectedChecksum:)`` first, which checks them.
public struct LibretroGame: Game {
    /// Bytes of input per player and frame.
    public static let inputSize = 2

    /// The core.
    public let core: LibretroCore
    /// Players, each on the port of the same number.
    public let playerCount: Int
    /// The buttons passed on to the core; the others are dropped from every input.
    public let buttonMask: JoypadButtons
    /// What each input carries: buttons, or buttons and sticks.
    public let inputLayout: LibretroInputLayout

    /// Wraps a started core for `playerCount` players (at most `core.portCount`), passing on
    /// only the buttons in `buttonMask`, with inputs in `inputLayout`.
    public init(core: LibretroCore, playerCount: Int, buttonMask: JoypadButtons = .all,
                inputLayout: LibretroInputLayout = .joypad) throws {
        guard playerCount >= 1 && playerCount <= core.portCount else {
            throw LibretroError.invalidPort(playerCount - 1, portCount: core.portCount)
        }
        self.core = core
        self.playerCount = playerCount
        self.buttonMask = buttonMask
        self.inputLayout = inputLayout
    }

    public func saveState() -> LibretroState {
        do {
            return try core.saveState()
        } catch {
            fatalError("libretro host: \(error)")
        }
    }

    public mutating func loadState(_ state: LibretroState) {
        do {
            try core.loadState(state)
        } catch {
            fatalError("libretro host: cannot restore a state the core saved: \(error)")
        }
    }

    public mutating func advanceFrame(_ inputs: FrameInputs) {
        // Before any input is written: a closed core's slot may be another live core's.
        precondition(!core.isClosed, "LibretroCore used after close()")
        let players = min(inputs.count, playerCount)
        let mask = buttonMask.rawValue
        let analog = inputLayout == .joypadAnalog
        for player in 0 ..< players {
            let input = inputs[player]
            core.setJoypadUnchecked(UInt16(truncatingIfNeeded: input.low) & mask, port: player)
            if analog { core.setAnalogUnchecked(LibretroPadInput(input).sticks, port: player) }
        }
        let resimulating = inputs.isResimulating
        if resimulating { core.presentsOutput = false }
        core.run()
        if resimulating { core.presentsOutput = true }
    }

    public func checksum() -> UInt64 {
        do {
            return try core.stateChecksum()
        } catch {
            fatalError("libretro host: \(error)")
        }
    }
}

extension JoypadButtons {
    /// The buttons in a player's rollback input (its first two bytes).
    public init(_ input: GameInput) {
        self.init(rawValue: UInt16(truncatingIfNeeded: input.low))
    }

    /// These buttons as a rollback input (``LibretroGame/inputSize`` bytes).
    public var gameInput: GameInput { GameInput(low: UInt64(rawValue)) }
}
