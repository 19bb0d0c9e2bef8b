import CNetplayProto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A reusable bump arena that protobuf-c allocates from while it unpacks a frame.
///
/// `protobuf_c_message_unpack` takes a `ProtobufCAllocator`; this one hands out memory from one
/// block that ``reset()`` rewinds, so unpacking a frame allocates nothing once the block is
/// large enough. A request that does not fit is served by `malloc` and released at the next
/// reset (and the block grows for the next frames, up to a cap). `free` is a no-op: the arena
/// releases everything at once. Confined to one thread; everything unpacked from it is valid
/// only until the next ``reset()``.
final class WireFrameArena {
    /// The allocator's state, at a stable address for protobuf-c's `allocator_data`.
    struct State {
        var base: UnsafeMutableRawPointer
        var capacity: Int
        var used: Int
        /// `malloc`ed blocks that did not fit, linked through their first word.
        var overflow: UnsafeMutableRawPointer?
        var overflowBytes: Int
    }

    private let state: UnsafeMutablePointer<State>
    private let allocator: UnsafeMutablePointer<ProtobufCAllocator>
    private let maxCapacity: Int

    /// An arena of `capacity` bytes (64 at least: a block of none would never grow), growing up
    /// to `maxCapacity`.
    init(capacity requested: Int = 16 * 1024, maxCapacity: Int = 2 * 1024 * 1024) {
        let capacity = max(requested, 64)
        self.maxCapacity = max(capacity, maxCapacity)
        state = .allocate(capacity: 1)
        state.initialize(to: State(base: .allocate(byteCount: capacity, alignment: 16), capacity: capacity,
                                   used: 0, overflow: nil, overflowBytes: 0))
        allocator = .allocate(capacity: 1)
        allocator.initialize(to: ProtobufCAllocator(
            alloc: { data, size in
                // protobuf-c asks for lengths within a frame (1 MiB); anything else is refused,
                // not rounded into a small block (a size_t past Int.max arrives negative).
                guard let data, size >= 0, size <= 1 << 30 else { return nil }
                let state = data.assumingMemoryBound(to: WireFrameArena.State.self)
                let rounded = (max(size, 1) + 15) & ~15
                if state.pointee.used + rounded <= state.pointee.capacity {
                    let result = state.pointee.base + state.pointee.used
                    state.pointee.used += rounded
                    return result
                }
                guard let block = malloc(rounded + 16) else { return nil }
                block.storeBytes(of: state.pointee.overflow, as: UnsafeMutableRawPointer?.self)
                state.pointee.overflow = block
                state.pointee.overflowBytes += rounded
                return block + 16
            },
            free: { _, _ in },
            allocator_data: UnsafeMutableRawPointer(state)))
    }

    deinit {
        releaseOverflow()
        state.pointee.base.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
        allocator.deinitialize(count: 1)
        allocator.deallocate()
    }

    /// The allocator to pass to protobuf-c.
    var cAllocator: UnsafeMutablePointer<ProtobufCAllocator> { allocator }

    /// Bytes handed out since the last reset (the block's share only).
    var used: Int { state.pointee.used }

    /// Capacity of the reusable block.
    var capacity: Int { state.pointee.capacity }

    /// Forgets everything allocated; the block is reused, overflow blocks are freed and the block
    /// grows when it overflowed.
    func reset() {
        let overflowed = state.pointee.overflowBytes
        releaseOverflow()
        if overflowed > 0 && state.pointee.capacity < maxCapacity {
            var grown = state.pointee.capacity
            while grown < state.pointee.capacity + overflowed && grown < maxCapacity { grown *= 2 }
            state.pointee.base.deallocate()
            state.pointee.base = .allocate(byteCount: min(grown, maxCapacity), alignment: 16)
            state.pointee.capacity = min(grown, maxCapacity)
        }
        state.pointee.used = 0
    }

    private func releaseOverflow() {
        var block = state.pointee.overflow
        while let current = block {
            block = current.load(as: UnsafeMutableRawPointer?.self)
            free(current)
        }
        state.pointee.overflow = nil
        state.pointee.overflowBytes = 0
    }
}
