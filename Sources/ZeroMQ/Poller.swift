import CZeroMQ

/// Which readiness a ``Poller`` item waits for.
public struct PollEvents: OptionSet, Sendable {
    public let rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }
    /// A message (or bytes, for a file descriptor) can be received.
    public static let readable = PollEvents(rawValue: Int16(ZMQ_POLLIN))
    /// A message can be sent without blocking.
    public static let writable = PollEvents(rawValue: Int16(ZMQ_POLLOUT))
}

/// A `zmq_poll` set over sockets and plain file descriptors.
///
/// Like sockets, a poller belongs to one thread. Items are addressed by the index ``add(_:events:)``
/// returns; after ``poll(timeout:)`` ask ``isReadable(_:)`` / ``isWritable(_:)`` per item.
public final class Poller {
    private var items: [zmq_pollitem_t] = []
    private var sockets: [Socket?] = []

    /// Creates an empty poller.
    public init() {}

    /// The number of items.
    public var count: Int { items.count }

    /// Watches `socket` for `events`; returns the item's index. A closed socket keeps its index
    /// and is never reported (its item was descriptor 0, standard input, which a supervised
    /// child's /dev/null keeps readable: the reactor spun).
    @discardableResult
    public func add(_ socket: Socket, events: PollEvents = .readable) -> Int {
        items.append(zmq_pollitem_t(socket: socket.handle, fd: socket.handle == nil ? -1 : 0, events: events.rawValue, revents: 0))
        sockets.append(socket)
        return items.count - 1
    }

    /// Watches a plain file descriptor (a pipe, a UDP socket) for `events`; returns its index.
    @discardableResult
    public func add(fileDescriptor: Int32, events: PollEvents = .readable) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fileDescriptor, events: events.rawValue, revents: 0))
        sockets.append(nil)
        return items.count - 1
    }

    /// Removes the item at `index`; later items move down by one.
    public func remove(at index: Int) {
        items.remove(at: index)
        sockets.remove(at: index)
    }

    /// Waits up to `timeout` milliseconds (-1: forever, 0: just check) for any item to be ready.
    /// Returns how many items are ready. An interrupting signal returns 0.
    @discardableResult
    public func poll(timeout milliseconds: Int) throws(ZMQError) -> Int {
        let ready = items.withUnsafeMutableBufferPointer { buffer in
            zmq_poll(buffer.baseAddress, Int32(buffer.count), milliseconds)
        }
        if ready == -1 {
            let error = ZMQError.last
            if error == .interrupted {
                for index in items.indices { items[index].revents = 0 }
                return 0
            }
            throw error
        }
        return Int(ready)
    }

    /// True when item `index` was readable at the last poll.
    public func isReadable(_ index: Int) -> Bool {
        items[index].revents & Int16(ZMQ_POLLIN) != 0
    }

    /// True when item `index` was writable at the last poll.
    public func isWritable(_ index: Int) -> Bool {
        items[index].revents & Int16(ZMQ_POLLOUT) != 0
    }
}
