import CLibretro

/// Saving, loading and checking a core's serialized states (`retro_serialize`,
/// `retro_unserialize`), made at most once a frame.
extension LibretroCore {
    /// Saves the current state (`retro_serialize`).
    public func saveState() throws -> LibretroState {
        LibretroState(bytes: try currentState())
    }

    /// Restores a state made by this core with this content (`retro_unserialize`).
    ///
    /// - Throws: ``LibretroError/stateSizeMismatch(expected:actual:)`` when the state has
    ///   another size than this core's states (and the core does not declare variable sizes),
    ///   ``LibretroError/unserializeFailed(core:size:)`` when the core refuses it.
    public func loadState(_ state: LibretroState) throws {
        try unserialize(state.bytes)
    }

    /// Restores a state from raw bytes; see ``loadState(_:)``.
    public func unserialize(_ bytes: [UInt8]) throws {
        precondition(!closed, "LibretroCore used after close()")
        try checkSize(bytes.count)
        current = nil
        let accepted = bytes.withUnsafeBytes { entry.unserialize($0.baseAddress, $0.count) }
        guard accepted else { throw LibretroError.unserializeFailed(core: systemInfo.libraryName, size: bytes.count) }
    }

    /// Builds a state from bytes received from elsewhere (a state transfer), checking that its
    /// size fits this core and, when given, that its checksum is `expectedChecksum`.
    public func state(from bytes: [UInt8], expectedChecksum: UInt64? = nil) throws -> LibretroState {
        try checkSize(bytes.count)
        let state = LibretroState(bytes: bytes)
        if let expectedChecksum, state.checksum != expectedChecksum {
            throw LibretroError.stateChecksumMismatch(expected: expectedChecksum, actual: state.checksum)
        }
        return state
    }

    /// A 64-bit hash of the current serialized state: what peers compare to detect desyncs.
    public func stateChecksum() throws -> UInt64 {
        try currentState().withUnsafeBytes { nlr_hash64($0.baseAddress, $0.count) }
    }

    fileprivate func checkSize(_ count: Int) throws {
        if !environment.quirks.contains(.coreVariableSize) && count != stateSize {
            throw LibretroError.stateSizeMismatch(expected: stateSize, actual: count)
        }
    }

    /// The serialized current state, made once per frame.
    fileprivate func currentState() throws -> [UInt8] {
        precondition(!closed, "LibretroCore used after close()")
        if let current { return current }
        if environment.quirks.contains(.coreVariableSize) {
            let reported = entry.serializeSize()
            guard (1 ... Self.maximumStateSize).contains(reported) else {
                throw LibretroError.serializeFailed(core: systemInfo.libraryName, size: reported)
            }
            stateSize = reported
        }
        var size = stateSize
        var ok = false
        var bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in buffer.initialize(repeating: 0);
            ok = entry.serialize(buffer.baseAddress, size)
            count = size
        }
        if !ok {
            // The size may have changed without the core saying so: ask once more.
            let newSize = entry.serializeSize()
            if newSize != size && (1 ... Self.maximumStateSize).contains(newSize) {
                size = newSize
                stateSize = newSize
                bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in buffer.initialize(repeating: 0);
                    ok = entry.serialize(buffer.baseAddress, size)
                    count = size
                }
            }
        }
        guard ok else { throw LibretroError.serializeFailed(core: systemInfo.libraryName, size: size) }
        current = bytes
        return bytes
    }
}
