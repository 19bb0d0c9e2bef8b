/// The bytes of states a relay holds for its transfers in flight, across all its sessions,
/// against ``RelayConfiguration/maxTransferBytes``. A transfer reserves its state's size with
/// its first chunk and gives it back when it ends; one that does not fit is refused, and its
/// session tries again a moment later. Used on the relay's reactor thread only.
final class TransferBudget {
    /// Bytes that may be reserved at once.
    let capacity: Int
    /// Bytes reserved now.
    private(set) var held = 0

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Reserves `bytes` if they fit; returns whether they did.
    func reserve(_ bytes: Int) -> Bool {
        guard bytes <= capacity - held else { return false }
        held += bytes
        return true
    }

    /// Gives back `bytes` reserved before.
    func release(_ bytes: Int) {
        held = max(0, held - bytes)
    }
}
