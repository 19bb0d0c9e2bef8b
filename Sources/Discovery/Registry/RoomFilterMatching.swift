import NetplayWire

/// A ``RoomFilter`` prepared for matching many rooms: the game-name needle is lower-cased once.
///
/// Matching rules (unset fields match everything): the game name is a case-insensitive (ASCII)
/// substring of the room's game name; core, CRC32, MD5, region, system and source are exact;
/// `has_free_slot` keeps rooms with a free player slot (or an unknown capacity, `max_players` 0,
/// as for RetroArch hosts); `no_password` drops rooms with a play password; rooms whose match has
/// started are listed only with `include_in_progress`.
public struct CompiledRoomFilter: Sendable {
    /// The filter as requested.
    public let filter: RoomFilter
    let needle: [UInt8]

    /// Prepares `filter`.
    public init(_ filter: RoomFilter) {
        self.filter = filter
        needle = ASCII.lowercased(Array(filter.gameName.utf8))
    }

    /// True when `room` passes; `gameLower` is the room's game name lower-cased (cached by the
    /// registry so a list over thousands of rooms lower-cases nothing).
    public func matches(_ room: Room, gameLower: [UInt8]) -> Bool {
        let filter = self.filter
        if !filter.includeInProgress && room.inProgress { return false }
        if filter.transport != .unspecified && room.transport != filter.transport { return false }
        if filter.source != .unspecified && room.source != filter.source { return false }
        if filter.noPassword && room.hasPassword { return false }
        if filter.hasFreeSlot && room.maxPlayers != 0 && room.currentPlayers >= room.maxPlayers { return false }
        if filter.crc32 != 0 && room.contentInfo.crc32 != filter.crc32 { return false }
        if !filter.md5.isEmpty && room.contentInfo.md5 != filter.md5 { return false }
        if !filter.coreId.isEmpty && room.contentInfo.coreId != filter.coreId { return false }
        if !filter.region.isEmpty && room.region != filter.region { return false }
        if !filter.system.isEmpty && room.contentInfo.system != filter.system { return false }
        if !needle.isEmpty && !ASCII.contains(gameLower, needle) { return false }
        return true
    }

    /// True when `room` passes (lower-cases its game name on the way: for one-off checks).
    public func matches(_ room: Room) -> Bool {
        matches(room, gameLower: ASCII.lowercased(Array(room.contentInfo.gameName.utf8)))
    }
}

/// Byte-level ASCII helpers for case-insensitive matching without Foundation.
enum ASCII {
    static func lowercased(_ bytes: [UInt8]) -> [UInt8] {
        bytes.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        if needle.isEmpty { return true }
        if needle.count > haystack.count { return false }
        let first = needle[0]
        let last = haystack.count - needle.count
        return haystack.withUnsafeBufferPointer { h in
            needle.withUnsafeBufferPointer { n in
                var i = 0
                while i <= last {
                    if h[i] == first {
                        var j = 1
                        while j < n.count && h[i + j] == n[j] { j += 1 }
                        if j == n.count { return true }
                    }
                    i += 1
                }
                return false
            }
        }
    }
}

extension Room {
    /// The room's content, or an empty one when the announcer sent none.
    public var contentInfo: ContentInfo { content ?? ContentInfo() }
}
