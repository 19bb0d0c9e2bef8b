import Foundation
import Libretro
import NetplayWire
import Rollback

extension ContentInfo {
    /// The wire form of a core's content identity (what a room announces).
    init(_ identity: ContentIdentity) {
        self.init(gameName: identity.gameName, crc32: identity.crc32, md5: identity.md5, coreId: identity.coreId,
                  coreVersion: identity.coreVersion, system: identity.system, contentSize: identity.size)
    }
}

/// Random joypad inputs for a core: every 8 frames a new random set of held buttons per slot
/// (the game's button mask drops what the core must not see), or nothing pressed.
struct CoreInputScript {
    let kind: InputScript.Kind
    let seed: UInt64
    let slot: Int
    var layout: LibretroInputLayout = .joypad

    func input(frame: Int) -> GameInput {
        guard kind == .random else { return .zero }
        let value = SeededRandom.hash(seed, UInt64(slot), UInt64(max(frame, 0) / 8))
        // The joypad layout keeps its 16 bits; the analog one adds the sticks from the rest.
        return GameInput(low: value, high: value >> 48).masked(toSize: layout.inputSize)
    }
}
