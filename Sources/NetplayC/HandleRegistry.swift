import Synchronization

/// The live handles the C API gave out. A handle is a number (never an address), so a NULL,
/// freed, foreign or wrong-kind handle is refused with NP_ERR_INVALID_HANDLE instead of being
/// dereferenced, and a lookup holds its object for the call even if another thread frees it.
enum HandleRegistry {
    private struct Table {
        var objects: [UInt: any AnyObject & Sendable] = [:]
        var next: UInt = 0x4E50_0000  // "NP": handles look like nothing else
    }

    private static let table = Mutex(Table())

    /// Registers `object` and returns its handle.
    static func register(_ object: any AnyObject & Sendable) -> OpaquePointer {
        let number = table.withLock { table in
            table.next += 16
            table.objects[table.next] = object
            return table.next
        }
        return OpaquePointer(bitPattern: number)!
    }

    /// The object behind `handle` when it is live and a `T`.
    static func lookup<T: AnyObject & Sendable>(_ handle: OpaquePointer?, as type: T.Type) -> T? {
        guard let handle else { return nil }
        let number = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        return table.withLock { $0.objects[number] as? T }
    }

    /// Forgets `handle` when it is live and a `T`; returns its object.
    static func remove<T: AnyObject & Sendable>(_ handle: OpaquePointer?, as type: T.Type) -> T? {
        guard let handle else { return nil }
        let number = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        return table.withLock { table in
            guard let object = table.objects[number] as? T else { return nil }
            table.objects[number] = nil
            return object
        }
    }
}
