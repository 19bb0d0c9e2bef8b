import CNetplayAPI
import NetplayKit
import NetplayWire

// Rooms across the C boundary: np_room rows for the browser, and back to a NetplayRoom to join.

extension np_room {
    /// The C row for `room`.
    init(_ room: NetplayRoom) {
        self.init()
        copyCString(room.id, into: &id)
        copyCString(room.sessionId, into: &session_id)
        copyCString(room.roomName, into: &room_name)
        copyCString(room.hostName, into: &host_name)
        copyCString(room.content.gameName, into: &game_name)
        copyCString(room.content.coreId, into: &core_id)
        copyCString(room.content.coreVersion, into: &core_version)
        crc32 = room.content.crc32
        // Clamped: a room is what a lobby or any LAN host says (a beacon is unauthenticated).
        max_players = Int32(clamping: room.maxPlayers)
        players = Int32(clamping: room.currentPlayers)
        spectators_allowed = room.spectatorsAllowed ? 1 : 0
        spectators = Int32(clamping: room.currentSpectators)
        has_password = room.hasPassword ? 1 : 0
        in_progress = room.inProgress ? 1 : 0
        frame_delay = Int32(clamping: room.frameDelay)
        is_lan = room.isLAN ? 1 : 0
        copyCString(room.endpoint, into: &endpoint)
        ping_ms = Int32(clamping: room.pingMs ?? -1)
    }

    /// The room to join: what a join needs of it (session, LAN or lobby, endpoint).
    func netplayRoom() throws(CAPIFailure) -> NetplayRoom {
        let sessionId = string(fromCField: session_id)
        guard !sessionId.isEmpty else { throw .invalid("the np_room has no session_id") }
        let endpoint = string(fromCField: self.endpoint)
        guard is_lan == 0 || !endpoint.isEmpty else { throw .invalid("a LAN np_room needs its endpoint") }
        let roomId = string(fromCField: id)
        var room = NetplayRoom(Room(roomId: roomId.isEmpty ? sessionId : roomId, sessionId: sessionId))
        room.roomName = string(fromCField: room_name)
        room.maxPlayers = Int(max_players)
        room.isLAN = is_lan != 0
        room.endpoint = endpoint
        return room
    }
}

@_cdecl("np_client_browse")
public func np_client_browse(_ client: OpaquePointer?, _ lanMilliseconds: Int32, _ rooms: UnsafeMutablePointer<np_room>?,
                             _ capacity: Int, _ count: UnsafeMutablePointer<Int>?) -> np_result {
    entry {
        let lobby = try ClientHandle.from(client).client.lobby
        guard let count else { throw CAPIFailure.invalid("count is NULL") }
        guard rooms != nil || capacity == 0 else { throw CAPIFailure.invalid("rooms is NULL with a capacity of \(capacity)") }
        guard (0 ... 60_000).contains(lanMilliseconds) else { throw CAPIFailure.invalid("lan_ms must be 0 ... 60000") }
        var found: [NetplayRoom] = []
        var lobbyError: (any Error)?
        if lanMilliseconds > 0 { found += (try? lobby.lanRooms(listeningFor: Int(lanMilliseconds))) ?? [] }
        if lobby.discoveryEndpoint != nil {
            do { found += try lobby.lobbyRooms() } catch { lobbyError = error }
        }
        // Nothing found and the lobby unreachable: say so rather than "no rooms".
        if found.isEmpty, let lobbyError { throw CAPIFailure(lobbyError) }
        var seen = Set<String>()
        found = lobby.measurePings(found.filter { seen.insert($0.id).inserted })
        // size_t: a capacity past Int.max (SIZE_MAX) arrives negative and means "room for all".
        let places = capacity < 0 ? Int.max : capacity
        for (index, room) in found.prefix(places).enumerated() { rooms![index] = np_room(room) }
        count.pointee = found.count
        if found.count > places {
            throw CAPIFailure(NP_ERR_BUFFER_TOO_SMALL, "\(found.count) rooms found, room for \(capacity)")
        }
    }
}
