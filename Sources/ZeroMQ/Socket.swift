import CZeroMQ

/// Flags for a send or receive call.
public struct MessageFlags: OptionSet, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Return ``ZMQError/wouldBlock`` instead of waiting.
    public static let dontWait = MessageFlags(rawValue: ZMQ_DONTWAIT)
    /// More frames of the same multipart message follow (send only).
    public static let more = MessageFlags(rawValue: ZMQ_SNDMORE)
}

/// A ZeroMQ socket.
///
/// ## Threading
/// A socket is confined to the thread that created it: create it, use it and let it go on one
/// thread. `Socket` is deliberately not `Sendable`, so the compiler rejects handing it to another
/// isolation domain. Async code reaches a socket by enqueueing work for the thread that owns it;
/// the service runtime's reactor (`NetplayService.Reactor`) is the standard way: a command queue
/// plus a wake-up pipe polled next to the sockets.
///
/// The socket keeps its ``Context`` alive and is closed when the object is released (or
/// explicitly with ``close()``). Set ``linger`` before closing when pending messages matter.
public final class Socket {
    /// The context this socket belongs to; retained so termination waits for us.
    public let context: Context
    /// The socket's type.
    public let type: SocketType
    /// The raw handle; `nil` after ``close()``.
    public var handle: UnsafeMutableRawPointer? { handleStorage.pointee }
    /// The handle lives behind a pointer rather than in a stored `var`: the socket is confined to
    /// one thread, and a stored `var` would pay a dynamic exclusivity check on every send/receive.
    private let handleStorage: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// A reusable zmq_msg_t, heap-allocated so its address is stable across calls.
    private let scratch: UnsafeMutablePointer<zmq_msg_t>
    /// Counts the inbound frames handed out, per connection, when set (``InboundLedger``).
    /// Confined to the socket's thread like the socket, so unchecked.
    @exclusivity(unchecked) public var inboundLedger: InboundLedger?

    init(context: Context, type: SocketType) throws(ZMQError) {
        guard let raw = zmq_socket(context.handle, type.rawValue) else { throw ZMQError.last }
        self.context = context
        self.type = type
        self.handleStorage = .allocate(capacity: 1)
        self.handleStorage.initialize(to: raw)
        self.scratch = .allocate(capacity: 1)
        zmq_msg_init(scratch)
    }

    deinit {
        close()
        zmq_msg_close(scratch)
        scratch.deallocate()
        handleStorage.deallocate()
    }

    /// Closes the socket now. Further calls throw ``ZMQError/notASocket``.
    public func close() {
        if let handle = handleStorage.pointee {
            zmq_close(handle)
            handleStorage.pointee = nil
        }
    }

    @inline(__always)
    var raw: UnsafeMutableRawPointer {
        get throws(ZMQError) {
            guard let handle else { throw ZMQError.notASocket }
            return handle
        }
    }

    // MARK: Endpoints

    /// Binds to `endpoint` (e.g. `tcp://127.0.0.1:7100`, `tcp://*:0`, `inproc://name`).
    public func bind(_ endpoint: String) throws(ZMQError) {
        try check(zmq_bind(try raw, endpoint))
    }

    /// Connects to `endpoint`; the connection is made (and remade) in the background.
    public func connect(_ endpoint: String) throws(ZMQError) {
        try check(zmq_connect(try raw, endpoint))
    }

    /// Stops listening on a bound endpoint.
    public func unbind(_ endpoint: String) throws(ZMQError) {
        try check(zmq_unbind(try raw, endpoint))
    }

    /// Drops a connection made with ``connect(_:)``.
    public func disconnect(_ endpoint: String) throws(ZMQError) {
        try check(zmq_disconnect(try raw, endpoint))
    }

    /// The endpoint last bound or connected, with wildcard ports resolved (`tcp://127.0.0.1:41234`).
    public var lastEndpoint: String {
        get throws(ZMQError) { try stringOption(ZMQ_LAST_ENDPOINT) }
    }

    // MARK: Sending

    /// Sends one frame from raw bytes.
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, flags: MessageFlags = []) throws(ZMQError) -> Int {
        let socket = try raw
        return Int(try retryingInterrupted { zmq_send(socket, bytes.baseAddress, bytes.count, flags.rawValue) })
    }

    /// Sends `[routingId, payload]` (or `[routingId, "", payload]` when `delimited`) on a ROUTER
    /// without blocking: the frames `send(_:flags:)` with `.dontWait` would send one by one, in one
    /// call (the hot path of a ROUTER that replies to many peers).
    public func sendRouted(to routingId: UnsafeRawBufferPointer, delimited: Bool,
                           payload: UnsafeRawBufferPointer) throws(ZMQError) {
        let socket = try raw
        try sendFrame(socket, routingId, ZMQ_DONTWAIT | ZMQ_SNDMORE)
        if delimited { try sendFrame(socket, UnsafeRawBufferPointer(start: nil, count: 0), ZMQ_DONTWAIT | ZMQ_SNDMORE) }
        try sendFrame(socket, payload, ZMQ_DONTWAIT)
    }

    @inline(__always)
    private func sendFrame(_ socket: UnsafeMutableRawPointer, _ bytes: UnsafeRawBufferPointer, _ flags: Int32) throws(ZMQError) {
        _ = try retryingInterrupted { zmq_send(socket, bytes.baseAddress, bytes.count, flags) }
    }

    /// Sends one frame.
    @discardableResult
    public func send(_ bytes: [UInt8], flags: MessageFlags = []) throws(ZMQError) -> Int {
        var result: Result<Int, ZMQError> = .success(0)
        bytes.withUnsafeBytes { buffer in
            do throws(ZMQError) { result = .success(try send(buffer, flags: flags)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    /// Sends a UTF-8 string as one frame.
    @discardableResult
    public func send(_ text: String, flags: MessageFlags = []) throws(ZMQError) -> Int {
        try send(Array(text.utf8), flags: flags)
    }

    /// Sends all `frames` as one multipart message (atomically: all or none are delivered).
    public func sendMultipart(_ frames: [[UInt8]], flags: MessageFlags = []) throws(ZMQError) {
        precondition(!frames.isEmpty, "a message has at least one frame")
        let base = flags.subtracting(.more)
        for (index, frame) in frames.enumerated() {
            let isLast = index == frames.count - 1
            try send(frame, flags: isLast ? base : base.union(.more))
        }
    }

    // MARK: Receiving

    /// Receives the next frame into the reusable message `scratch`.
    @inline(__always)
    private func receiveIntoScratch(_ socket: UnsafeMutableRawPointer, _ flags: MessageFlags) throws(ZMQError) {
        _ = try retryingInterrupted { zmq_msg_recv(scratch, socket, flags.rawValue) }
        if let inboundLedger { inboundLedger.add(fd: zmq_msg_get(scratch, ZMQ_SRCFD), bytes: zmq_msg_size(scratch)) }
    }

    /// Receives one frame and hands its bytes to `body` without copying; the bytes are valid only
    /// inside `body`. `more` tells whether further frames of the same message follow.
    public func receive<Result>(
        flags: MessageFlags = [],
        _ body: (_ bytes: UnsafeRawBufferPointer, _ more: Bool) throws -> Result
    ) throws -> Result {
        let socket = try raw
        try receiveIntoScratch(socket, flags)
        let bytes = UnsafeRawBufferPointer(start: zmq_msg_data(scratch), count: zmq_msg_size(scratch))
        let more = zmq_msg_more(scratch) == 1
        return try body(bytes, more)
    }

    /// Receives one frame into the socket's reusable message and returns its bytes, borrowed, and
    /// whether more frames of the same message follow. The bytes stay valid until the next
    /// receive on this socket. For hot paths: no closure, no copy, and `more` comes from the
    /// message itself (no `ZMQ_RCVMORE` option call).
    public func receiveBorrowed(flags: MessageFlags = []) throws(ZMQError) -> (bytes: UnsafeRawBufferPointer, more: Bool) {
        let socket = try raw
        try receiveIntoScratch(socket, flags)
        return (UnsafeRawBufferPointer(start: zmq_msg_data(scratch), count: zmq_msg_size(scratch)), zmq_msg_more(scratch) == 1)
    }

    /// A metadata property of the frame received last (`"Peer-Address"`, `"User-Id"` set by the
    /// ZAP handler, `"Socket-Type"`, ...), or nil when the frame carries none. Valid until the
    /// next receive on this socket.
    public func propertyOfLastFrame(_ name: String) -> String? {
        guard let value = zmq_msg_gets(scratch, name) else { return nil }
        return String(cString: value)
    }

    /// Receives one frame as a byte array.
    public func receive(flags: MessageFlags = []) throws(ZMQError) -> [UInt8] {
        try receiveFrame(flags: flags).bytes
    }

    /// Receives one frame as a byte array and whether more frames follow.
    public func receiveFrame(flags: MessageFlags = []) throws(ZMQError) -> (bytes: [UInt8], more: Bool) {
        let socket = try raw
        try receiveIntoScratch(socket, flags)
        let count = zmq_msg_size(scratch)
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if count > 0 { buffer.baseAddress!.update(from: zmq_msg_data(scratch).assumingMemoryBound(to: UInt8.self), count: count) }
            initialized = count
        }
        return (bytes, zmq_msg_more(scratch) == 1)
    }

    /// Receives one frame into `buffer` (no allocation). Returns the frame's full size, which is
    /// larger than `buffer.count` when the frame was truncated.
    public func receive(into buffer: UnsafeMutableRawBufferPointer, flags: MessageFlags = []) throws(ZMQError) -> Int {
        let socket = try raw
        return Int(try retryingInterrupted { zmq_recv(socket, buffer.baseAddress, buffer.count, flags.rawValue) })
    }

    /// Receives every frame of the next message.
    public func receiveMultipart(flags: MessageFlags = []) throws(ZMQError) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        var first = true
        while true {
            // After the first frame the rest are already queued: never block on them.
            let frame = try receiveFrame(flags: first ? flags : [])
            first = false
            frames.append(frame.bytes)
            if !frame.more { return frames }
        }
    }

    /// Receives one frame as UTF-8 text (invalid sequences are repaired).
    public func receiveString(flags: MessageFlags = []) throws(ZMQError) -> String {
        String(decoding: try receive(flags: flags), as: UTF8.self)
    }

    /// True when the last frame received was followed by more frames.
    public var hasMore: Bool {
        get throws(ZMQError) { try intOption(ZMQ_RCVMORE) != 0 }
    }

    /// Whether the socket can receive or send without blocking right now (`ZMQ_EVENTS`).
    public var readiness: (readable: Bool, writable: Bool) {
        get throws(ZMQError) {
            let events = try intOption(ZMQ_EVENTS)
            return (events & Int32(ZMQ_POLLIN) != 0, events & Int32(ZMQ_POLLOUT) != 0)
        }
    }
}

/// Calls `call` (a libzmq send or receive) again while a signal interrupts it (`EINTR`), and
/// throws any other failure: libzmq calls return -1 and leave the cause in `zmq_errno`.
@inline(__always)
func retryingInterrupted(_ call: () -> Int32) throws(ZMQError) -> Int32 {
    while true {
        let result = call()
        if result >= 0 { return result }
        let error = ZMQError.last
        if error != .interrupted { throw error }
    }
}
