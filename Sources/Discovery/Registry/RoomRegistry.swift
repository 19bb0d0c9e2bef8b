import NetplayService
import NetplayWire

/// Limits of the room registry (all configurable by flags of netplay-discovery).
public struct RoomRegistryLimits: Sendable, Equatable {
    /// TTL of an announcement that asks for none.
    public var defaultTTLMs: UInt32 = 60_000
    /// The longest TTL granted.
    public var maxTTLMs: UInt32 = 600_000
    /// The shortest TTL granted.
    public var minTTLMs: UInt32 = 500
    /// Rooms in the registry at most (beyond: OVERLOADED).
    public var maxRooms = 200_000
    /// Rooms one announcer may hold at most (beyond: OVERLOADED); as many as a coordinator's
    /// sessions by default.
    public var maxRoomsPerAnnouncer = 100_000

    /// The defaults.
    public init() {}

    /// The TTL granted for a request of `requested` ms (0 = default), clamped to the limits.
    public func grantedTTL(_ requested: UInt32) -> UInt32 {
        requested == 0 ? defaultTTLMs : min(max(requested, minTTLMs), maxTTLMs)
    }
}

/// The room registry: soft state with a TTL per room, ordered by room id for paging, with one
/// global sequence that numbers every change (the watch protocol's backbone).
///
/// Pure logic without I/O or clocks; not thread-safe (the discovery service calls it from its
/// reactor thread only). Listing 10,000 rooms with a filter scans them once (no allocation per
/// room, game names lower-cased once at announce time).
public final class RoomRegistry {
    /// The limits in force.
    public let limits: RoomRegistryLimits
    /// The sequence of the last change (0 before any).
    public private(set) var sequence: UInt64 = 0

    final class Entry {
        private(set) var room: Room
        var announcerId: String
        var ttlMs: UInt32
        var expiresAtMs: UInt64
        // What filters look at, unpacked once per change and stored inline, so a list over
        // thousands of rooms copies no strings and touches no reference counts for rooms that
        // do not match.
        private var inProgress = false, hasPassword = false, full = false
        private var transport = Transport.unspecified, source = RoomSource.unspecified
        private var crc32: UInt32 = 0
        private var md5: [UInt8] = [], coreId = "", region = "", system = ""
        private var gameLower: [UInt8] = []
        /// The room's encoded size (with its field header in a page), for a page's byte budget.
        private(set) var encodedBytes = 0

        init(room: Room, announcerId: String, ttlMs: UInt32, expiresAtMs: UInt64) {
            self.room = room
            self.announcerId = announcerId
            self.ttlMs = ttlMs
            self.expiresAtMs = expiresAtMs
            unpack()
        }

        /// Replaces the room (and what filters look at).
        func replace(_ room: Room) {
            self.room = room
            unpack()
        }

        /// Moves the room's timestamps (nothing filters look at).
        func touch(updatedAtUnixMs: UInt64, expiresAtUnixMs: UInt64) {
            room.updatedAtUnixMs = updatedAtUnixMs
            room.expiresAtUnixMs = expiresAtUnixMs
        }

        private func unpack() {
            let content = room.contentInfo
            inProgress = room.inProgress
            hasPassword = room.hasPassword
            full = room.maxPlayers != 0 && room.currentPlayers >= room.maxPlayers
            transport = room.transport
            source = room.source
            crc32 = content.crc32
            md5 = content.md5
            coreId = content.coreId
            region = room.region
            system = content.system
            gameLower = ASCII.lowercased(Array(content.gameName.utf8))
            // A room that cannot be encoded (it passed validation, so none) counts as the largest.
            encodedBytes = ((try? room.encoded().count) ?? RoomRegistry.largestRoomBytes) + 4
        }

        /// ``CompiledRoomFilter``'s rules over the unpacked fields (kept in step with
        /// ``CompiledRoomFilter/matches(_:gameLower:)``).
        func matches(_ compiled: CompiledRoomFilter) -> Bool {
            let filter = compiled.filter
            if !filter.includeInProgress && inProgress { return false }
            if filter.transport != .unspecified && transport != filter.transport { return false }
            if filter.source != .unspecified && source != filter.source { return false }
            if filter.noPassword && hasPassword { return false }
            if filter.hasFreeSlot && full { return false }
            if filter.crc32 != 0 && crc32 != filter.crc32 { return false }
            if !filter.md5.isEmpty && md5 != filter.md5 { return false }
            if !filter.coreId.isEmpty && coreId != filter.coreId { return false }
            if !filter.region.isEmpty && region != filter.region { return false }
            if !filter.system.isEmpty && system != filter.system { return false }
            if !compiled.needle.isEmpty && !ASCII.contains(gameLower, compiled.needle) { return false }
            return true
        }
    }

    private var byId: [String: Entry] = [:]
    private var ordered: [Entry] = []
    private var perAnnouncer: [String: Int] = [:]
    private var earliestExpiry = UInt64.max

    /// Creates an empty registry.
    public init(limits: RoomRegistryLimits = RoomRegistryLimits()) {
        self.limits = limits
    }

    /// Rooms held.
    public var count: Int { ordered.count }

    /// The room with this id.
    public func room(_ roomId: String) -> Room? { byId[roomId]?.room }

    /// Who announced the room.
    public func announcer(of roomId: String) -> String? { byId[roomId]?.announcerId }

    /// Rooms held per announcer.
    public var announcerCounts: [String: Int] { perAnnouncer }

    // MARK: Changes

    /// Announces `room` for `announcerId`, or replaces the announcer's room with that id. The
    /// registry sets `source` (to `source`), `created/updated/expires_at` and `revision`.
    /// A replacement equal to the current room only extends the TTL (no event).
    public func announce(_ room: Room, announcerId: String, ttlMs requestedTTL: UInt32, source: RoomSource = .lobby,
                         at time: RegistryTime) throws(ServiceError) -> (AnnounceRoomResponse, RoomChange?) {
        try Self.validate(room)
        let ttl = limits.grantedTTL(requestedTTL)
        var room = room
        room.source = source
        if let entry = byId[room.roomId] {
            guard entry.announcerId == announcerId else {
                throw ServiceError(.permissionDenied, "Room '\(room.roomId)' belongs to another announcer.",
                                   field: "AnnounceRoomRequest.announcer_id")
            }
            room.createdAtUnixMs = entry.room.createdAtUnixMs
            entry.ttlMs = ttl
            entry.expiresAtMs = time.monotonicMs + UInt64(ttl)
            earliestExpiry = min(earliestExpiry, entry.expiresAtMs)
            room.expiresAtUnixMs = time.unixMs + UInt64(ttl)
            room.updatedAtUnixMs = time.unixMs
            if Self.sameContent(entry.room, room) {
                entry.touch(updatedAtUnixMs: time.unixMs, expiresAtUnixMs: room.expiresAtUnixMs)
                return (AnnounceRoomResponse(roomId: room.roomId, created: false, ttlMs: ttl,
                                             expiresAtUnixMs: room.expiresAtUnixMs, revision: entry.room.revision), nil)
            }
            sequence += 1
            room.revision = sequence
            entry.replace(room)
            return (AnnounceRoomResponse(roomId: room.roomId, created: false, ttlMs: ttl,
                                         expiresAtUnixMs: room.expiresAtUnixMs, revision: sequence),
                    .updated(RoomUpdated(sequence: sequence, room: room)))
        }
        guard ordered.count < limits.maxRooms else {
            throw ServiceError(.overloaded, "The registry holds its maximum of \(limits.maxRooms) rooms.", retryAfterMs: 5_000)
        }
        guard perAnnouncer[announcerId, default: 0] < limits.maxRoomsPerAnnouncer else {
            throw ServiceError(.overloaded, "Announcer '\(announcerId)' holds its maximum of \(limits.maxRoomsPerAnnouncer) rooms.",
                               retryAfterMs: 5_000)
        }
        sequence += 1
        room.createdAtUnixMs = time.unixMs
        room.updatedAtUnixMs = time.unixMs
        room.expiresAtUnixMs = time.unixMs + UInt64(ttl)
        room.revision = sequence
        let entry = Entry(room: room, announcerId: announcerId, ttlMs: ttl, expiresAtMs: time.monotonicMs + UInt64(ttl))
        byId[room.roomId] = entry
        ordered.insert(entry, at: insertionIndex(for: room.roomId))
        perAnnouncer[announcerId, default: 0] += 1
        earliestExpiry = min(earliestExpiry, entry.expiresAtMs)
        return (AnnounceRoomResponse(roomId: room.roomId, created: true, ttlMs: ttl,
                                     expiresAtUnixMs: room.expiresAtUnixMs, revision: sequence),
                .added(RoomAdded(sequence: sequence, room: room)))
    }

    /// Extends a room's TTL, optionally replacing its occupancy. NOT_FOUND when it expired.
    public func refresh(_ request: RefreshRoomRequest, at time: RegistryTime) throws(ServiceError) -> (RefreshRoomResponse, RoomChange?) {
        guard let entry = byId[request.roomId] else {
            throw ServiceError(.notFound, "No room '\(request.roomId)' (it expired or was withdrawn); announce it again.",
                               field: "RefreshRoomRequest.room_id")
        }
        guard entry.announcerId == request.announcerId else {
            throw ServiceError(.permissionDenied, "Room '\(request.roomId)' belongs to another announcer.",
                               field: "RefreshRoomRequest.announcer_id")
        }
        if request.ttlMs != 0 { entry.ttlMs = limits.grantedTTL(request.ttlMs) }
        entry.expiresAtMs = time.monotonicMs + UInt64(entry.ttlMs)
        earliestExpiry = min(earliestExpiry, entry.expiresAtMs)
        entry.touch(updatedAtUnixMs: time.unixMs, expiresAtUnixMs: time.unixMs + UInt64(entry.ttlMs))
        var change: RoomChange?
        if request.updateOccupancy {
            var room = entry.room
            room.currentPlayers = request.currentPlayers
            room.currentSpectators = request.currentSpectators
            room.inProgress = request.inProgress
            try Self.validate(room)
            if room != entry.room {
                sequence += 1
                room.revision = sequence
                entry.replace(room)
                change = .updated(RoomUpdated(sequence: sequence, room: room))
            }
        }
        return (RefreshRoomResponse(roomId: request.roomId, expiresAtUnixMs: entry.room.expiresAtUnixMs,
                                    revision: entry.room.revision), change)
    }

    /// Removes a room (idempotent: `removed` is false when it was already gone).
    public func withdraw(roomId: String, announcerId: String) throws(ServiceError) -> (WithdrawRoomResponse, RoomChange?) {
        guard let entry = byId[roomId] else { return (WithdrawRoomResponse(roomId: roomId, removed: false), nil) }
        guard entry.announcerId == announcerId else {
            throw ServiceError(.permissionDenied, "Room '\(roomId)' belongs to another announcer.",
                               field: "WithdrawRoomRequest.announcer_id")
        }
        let change = remove(entry, reason: .withdrawn)
        return (WithdrawRoomResponse(roomId: roomId, removed: true), change)
    }

    /// Removes a room whatever its announcer (operators; LAN hosts saying goodbye).
    public func evict(roomId: String, reason: RoomRemovalReason) -> RoomChange? {
        guard let entry = byId[roomId] else { return nil }
        return remove(entry, reason: reason)
    }

    /// Removes every room whose TTL ran out by `time`, in room-id order.
    public func expire(at time: RegistryTime) -> [RoomChange] {
        guard time.monotonicMs >= earliestExpiry else { return [] }
        var changes: [RoomChange] = []
        var next = UInt64.max
        let due = ordered.filter { entry in
            if entry.expiresAtMs <= time.monotonicMs { return true }
            next = min(next, entry.expiresAtMs)
            return false
        }
        earliestExpiry = next
        guard !due.isEmpty else { return [] }
        // One pass over the list, not one removal each: 200,000 rooms falling due at once (a
        // coordinator cut off past the TTL, a suspended VM) moved the list's tail each time.
        ordered.removeAll { $0.expiresAtMs <= time.monotonicMs }
        for entry in due {
            // Lobby and RetroArch relay rooms are announced by the cluster and expire; LAN rooms
            // are lost when their beacons stop.
            let lan = entry.room.source == .lanBeacon || entry.room.source == .retroarchLan
            changes.append(forget(entry, reason: lan ? .lanLost : .expired))
        }
        return changes
    }

    private func remove(_ entry: Entry, reason: RoomRemovalReason) -> RoomChange {
        let index = insertionIndex(for: entry.room.roomId)
        if index < ordered.count, ordered[index] === entry { ordered.remove(at: index) }
        return forget(entry, reason: reason)
    }

    /// Drops `entry` from the index and its announcer's count (the ordered list is the caller's).
    private func forget(_ entry: Entry, reason: RoomRemovalReason) -> RoomChange {
        let id = entry.room.roomId
        byId[id] = nil
        let remaining = (perAnnouncer[entry.announcerId] ?? 1) - 1
        perAnnouncer[entry.announcerId] = remaining > 0 ? remaining : nil
        sequence += 1
        return .removed(RoomRemoved(sequence: sequence, roomId: id, reason: reason))
    }

    // MARK: Queries

    /// One page of the rooms matching `filter`, in room-id order, after `pageToken`.
    /// Returns the page, the token of the next page ("" at the end) and how many rooms match in
    /// the whole registry.
    /// The encoded rooms one page may hold: a message is at most 1 MiB, and the page's own
    /// fields and the envelope need a little of it.
    static let pageBytes = 960 << 10
    /// More than any valid room encodes to (every string at its limit, eight slots).
    static let largestRoomBytes = 4_096

    public func page(filter: RoomFilter, pageSize: Int, pageToken: String,
                     tokenField: String) throws(ServiceError) -> (rooms: [Room], next: String, total: Int) {
        let after = try PageToken.decode(pageToken, field: tokenField)
        let compiled = CompiledRoomFilter(filter)
        let start = after.isEmpty ? 0 : firstIndex(after: after)
        var rooms: [Room] = []
        rooms.reserveCapacity(min(pageSize, 64))
        var total = 0
        var more = false
        var bytes = 0
        for index in 0..<ordered.count {
            let entry = ordered[index]
            guard entry.matches(compiled) else { continue }
            total += 1
            if index >= start && !more {
                // A page ends at its size or its byte budget, whichever comes first: a full page
                // of large rooms did not fit a message, and every watcher reaching it got INTERNAL.
                if rooms.count < pageSize && (rooms.isEmpty || bytes + entry.encodedBytes <= Self.pageBytes) {
                    rooms.append(entry.room)
                    bytes += entry.encodedBytes
                } else {
                    more = true
                }
            }
        }
        let next = more ? PageToken.after(rooms.last!.roomId) : ""
        return (rooms, next, total)
    }

    /// Every room, in room-id order (introspection, tests).
    public var allRooms: [Room] { ordered.map(\.room) }

    /// The first room after `roomId` in room-id order, wrapping around (`roomId` itself last),
    /// that `matches`; nil when none does. Copies no room but the one returned: a reply to
    /// an anonymous LAN query walks the registry, it does not copy it.
    public func nextRoom(after roomId: String, where matches: (Room) -> Bool) -> Room? {
        guard !ordered.isEmpty else { return nil }
        let start = firstIndex(after: roomId)
        for step in 0 ..< ordered.count {
            let entry = ordered[(start + step) % ordered.count]
            if matches(entry.room) { return entry.room }
        }
        return nil
    }

    // MARK: Validation

    /// Checks what the wire cannot: occupancy within capacity, a capacity of 1 to 8 players.
    public static func validate(_ room: Room) throws(ServiceError) {
        guard (1...8).contains(room.maxPlayers) || room.source == .retroarchLan else {
            throw ServiceError(.badRequest, "A room has 1 to 8 player slots; got \(room.maxPlayers).", field: "Room.max_players")
        }
        if room.maxPlayers != 0, room.currentPlayers > room.maxPlayers {
            throw ServiceError(.badRequest, "A room cannot hold \(room.currentPlayers) players in \(room.maxPlayers) slots.",
                               field: "Room.current_players")
        }
        if room.currentSpectators > room.maxSpectators {
            throw ServiceError(.badRequest, "A room cannot hold \(room.currentSpectators) spectators in \(room.maxSpectators) places.",
                               field: "Room.current_spectators")
        }
        if room.roomId.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw ServiceError(.badRequest, "A room id may not contain control characters.", field: "Room.room_id")
        }
    }

    private static func sameContent(_ a: Room, _ b: Room) -> Bool {
        var a = a, b = b
        for room in [\Room.createdAtUnixMs, \Room.updatedAtUnixMs, \Room.expiresAtUnixMs, \Room.revision] {
            a[keyPath: room] = 0
            b[keyPath: room] = 0
        }
        return a == b
    }

    // MARK: Ordering

    /// Index of the first entry whose id is not less than `id`.
    private func insertionIndex(for id: String) -> Int {
        var low = 0, high = ordered.count
        while low < high {
            let mid = (low + high) / 2
            if ordered[mid].room.roomId < id { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Index of the first entry whose id is greater than `id`.
    private func firstIndex(after id: String) -> Int {
        var low = 0, high = ordered.count
        while low < high {
            let mid = (low + high) / 2
            if ordered[mid].room.roomId <= id { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
