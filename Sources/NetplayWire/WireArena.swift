import CNetplayProto

/// A bump allocator holding the protobuf-c struct tree of one message while it is packed.
///
/// Everything allocated is released at once when the arena is deinitialized, so building a
/// message for protobuf-c costs a handful of allocations regardless of its field count. The
/// arena is confined to the encoding call that created it.
final class WireArena {
    private var blocks: [UnsafeMutableRawPointer] = []
    private var cursor: UnsafeMutableRawPointer?
    private var remaining = 0
    private var nextBlockSize: Int

    init(initialBlockSize: Int = 1024) {
        nextBlockSize = initialBlockSize
    }

    deinit {
        for block in blocks { block.deallocate() }
    }

    private static let alignment = 16

    func allocateRaw(byteCount: Int, alignment: Int) -> UnsafeMutableRawPointer {
        precondition(alignment <= WireArena.alignment)
        let bytes = max(byteCount, 1)
        if let cursor {
            let address = Int(bitPattern: cursor)
            let padding = (alignment - address % alignment) % alignment
            if padding + bytes <= remaining {
                let result = cursor + padding
                self.cursor = result + bytes
                remaining -= padding + bytes
                return result
            }
        }
        // New block: large requests get a block of their own, small ones share a growing block.
        let blockSize = max(nextBlockSize, bytes)
        nextBlockSize = min(nextBlockSize * 2, 64 * 1024)
        let block = UnsafeMutableRawPointer.allocate(byteCount: blockSize, alignment: WireArena.alignment)
        blocks.append(block)
        cursor = block + bytes
        remaining = blockSize - bytes
        return block
    }

    /// Uninitialized, suitably aligned memory for `count` values of `T`.
    func allocate<T>(_ type: T.Type, count: Int = 1) -> UnsafeMutablePointer<T> {
        let raw = allocateRaw(byteCount: MemoryLayout<T>.stride * count, alignment: MemoryLayout<T>.alignment)
        return raw.bindMemory(to: T.self, capacity: count)
    }

    /// A NUL-terminated copy of `string`'s UTF-8.
    func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
        var string = string
        return string.withUTF8 { utf8 in
            let p = allocate(CChar.self, count: utf8.count + 1)
            if let base = utf8.baseAddress {
                UnsafeMutableRawPointer(p).copyMemory(from: base, byteCount: utf8.count)
            }
            p[utf8.count] = 0
            return p
        }
    }

    /// A protobuf-c binary field pointing at a copy of `bytes`.
    func binary(_ bytes: [UInt8]) -> ProtobufCBinaryData {
        let p = copy(bytes)
        return ProtobufCBinaryData(len: bytes.count, data: p)
    }

    /// A copy of trivial values (integers, floats) in the arena.
    func copy<T: BitwiseCopyable>(_ values: [T]) -> UnsafeMutablePointer<T> {
        let p = allocate(T.self, count: values.count)
        values.withUnsafeBufferPointer { buffer in
            if let base = buffer.baseAddress {
                p.initialize(from: base, count: buffer.count)
            }
        }
        return p
    }
}
