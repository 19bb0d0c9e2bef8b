import NetplayWire
import Testing
@testable import NetplayService
import NetplayTestSupport

/// What `netplayctl tap` prints for each event without `--json`: one short line.
@Suite("Event summaries", .ownThread)
struct EventSummaryTests {
    static let alice = Participant(participantId: "p-a1", name: "alice", role: .player, slot: 1, connected: true, isHost: true)
    static let bob = Participant(participantId: "p-b2", name: "bob", role: .player, slot: 2, connected: true)

    static func session(_ room: String = "tapme", players: [Participant?] = [alice, bob], spectators: [Participant] = []) -> SessionInfo {
        SessionInfo(sessionId: "s-d37b", state: .running, settings: SessionSettings(roomName: room, content: ContentInfo(gameName: "Arena")),
                    slots: players.enumerated().map { Slot(slot: UInt32($0.offset + 1), participant: $0.element) },
                    spectators: spectators, hostParticipantId: "p-a1", relayId: "sync-0", relayEndpoint: "tcp://127.0.0.1:7300")
    }

    @Test func sessionEvents() {
        let started = SessionEvent(kind: .started, session: Self.session(), participantId: "p-a1")
        #expect(EventSummary.line(topic: "sessions.started", .sessionEvent(started))
                == "sessions.started s-d37b \"tapme\" 2/2 relay sync-0 by \"alice\" attached 2/2")
        var away = Self.bob
        away.connected = false
        let lobby = SessionEvent(kind: .playerJoined, session: Self.session(players: [Self.alice, away, nil]), participantId: "p-b2")
        #expect(EventSummary.line(topic: "sessions.player_joined", .sessionEvent(lobby))
                == "sessions.player_joined s-d37b \"tapme\" 2/3 relay sync-0 by \"bob\" attached 1/2")
        let ended = SessionEvent(kind: .ended, session: SessionInfo(sessionId: "s-1", settings: SessionSettings(roomName: "r")),
                                 reason: "every player left")
        #expect(EventSummary.line(topic: "sessions.ended", .sessionEvent(ended)) == "sessions.ended s-1 \"r\" 0/0 relay - (every player left)")
    }

    @Test func aSessionEventOfAFullRoomIsShort() {
        // A session event's JSON is ~2 KB; its line stays short whatever the room holds.
        let spectators = (0 ..< 8).map { Participant(participantId: "p-s\($0)", name: "watcher \($0)", role: .spectator) }
        let event = SessionEvent(kind: .spectatorJoined, session: Self.session(spectators: spectators), participantId: "p-s7")
        let line = EventSummary.line(topic: "sessions.spectator_joined", .sessionEvent(event))
        #expect(line == "sessions.spectator_joined s-d37b \"tapme\" 2/2 relay sync-0 spectators 8 by \"watcher 7\" attached 2/10")
        #expect(Envelope(body: .sessionEvent(event)).jsonLine().count > 4 * line.count)
    }

    @Test func relayAndRoomEvents() {
        let relay = RelayEvent(kind: .dropped, relay: RelayInfo(relayId: "sync-1", endpoint: "tcp://10.0.0.5:7301", region: "eu",
                                                                load: RelayLoad(sessions: 2, peers: 4), draining: true),
                               sessionIds: ["s-1", "s-2"])
        #expect(EventSummary.line(topic: "relays.dropped", .relayEvent(relay))
                == "relays.dropped sync-1 tcp://10.0.0.5:7301 region eu sessions 2 peers 4 draining")
        let room = Room(roomId: "s-d37b", roomName: "tapme", content: ContentInfo(gameName: "Arena"), maxPlayers: 2, currentPlayers: 1,
                        hasPassword: true, inProgress: true, transport: .relay)
        #expect(EventSummary.line(topic: "rooms.added", .roomAdded(RoomAdded(sequence: 4, room: room)))
                == "rooms.added s-d37b \"tapme\" game \"Arena\" 1/2 relay in progress password")
        #expect(EventSummary.line(topic: "rooms.updated", .roomUpdated(RoomUpdated(sequence: 5, room: Room(roomId: "lan-1", roomName: "x", maxPlayers: 4, transport: .lan))))
                == "rooms.updated lan-1 \"x\" game \"\" 0/4 lan")
        #expect(EventSummary.line(topic: "rooms.removed", .roomRemoved(RoomRemoved(sequence: 6, roomId: "s-d37b", reason: .expired)))
                == "rooms.removed s-d37b expired")
        #expect(EventSummary.line(topic: "rooms.sync", .roomsSync(RoomsSync(sequence: 9, roomCount: 3))) == "rooms.sync 3 rooms sequence 9")
    }

    @Test func syncEvents() {
        let peer = PeerEvent(kind: .disconnected, peer: PeerInfo(participantId: "p-b2", name: "bob", role: .player, slot: 2), frame: 840,
                             detail: "timed out")
        #expect(EventSummary.line(topic: "sync.peer_disconnected", .peerEvent(peer))
                == "sync.peer_disconnected disconnected \"bob\" P2 frame 840 timed out")
        let desync = DesyncNotice(sessionId: "s-d37b", frame: 600, divergedSlots: [2, 3], referenceSlot: 1, resyncStarted: true)
        #expect(EventSummary.line(topic: "sync.desync", .desyncNotice(desync))
                == "sync.desync s-d37b frame 600 diverged P2,P3 reference P1 resync started")
        let stats = SessionStats(sessionId: "s-d37b", relayId: "sync-0", confirmedFrame: 1200,
                                 peers: [PeerStats(slot: 1, connected: true), PeerStats(slot: 2)], desyncs: 1, resyncs: 1)
        #expect(EventSummary.line(topic: "hud.stats", .sessionStats(stats))
                == "hud.stats s-d37b relay sync-0 frame 1200 peers 1/2 desyncs 1 resyncs 1")
    }

    @Test func eventRecordsAndRetroArch() {
        let opened = EventRecord(service: "sync", instance: "sync-0", topic: "retroarch.session_opened", severity: .info,
                                 message: "RetroArch session AAAA opened: join 127.0.0.1:55435/AAAA",
                                 attributes: [KeyValue(key: "join", value: "127.0.0.1:55435/AAAA")], sessionId: "AAAA")
        #expect(EventSummary.line(topic: "retroarch.session_opened", .eventRecord(opened))
                == "retroarch.session_opened RetroArch session AAAA opened: join 127.0.0.1:55435/AAAA")
        let exited = EventRecord(service: "supervisor", topic: "supervisor.exited", severity: .warning, message: "sync-1 killed by signal 9")
        #expect(EventSummary.line(topic: "supervisor.exited", .eventRecord(exited)) == "supervisor.exited [warning] sync-1 killed by signal 9")
        let started = EventRecord(topic: "sync.session_started", message: "match started", sessionId: "s-d37b")
        #expect(EventSummary.line(topic: "sync.session_started", .eventRecord(started)) == "sync.session_started match started session s-d37b")
        let report = RetroArchSession(sessionId: "AAAA", relayId: "sync-0", join: "127.0.0.1:55435/AAAA", clients: 1, lastFrame: 90,
                                      ended: true, endReason: "host_closed")
        #expect(EventSummary.line(topic: "retroarch.session", .retroarchSession(report))
                == "retroarch.session AAAA relay sync-0 join 127.0.0.1:55435/AAAA clients 1 frame 90 ended host_closed")
        #expect(EventSummary.line(topic: "x.y", .ping(Ping(nonce: 1))) == "x.y Ping")
    }

    @Test func namesNeverBreakTheLine() {
        let event = SessionEvent(kind: .created, session: Self.session("two\nlines \"quoted\"\u{7}", players: [Self.alice, nil]))
        let line = EventSummary.line(topic: "sessions.created", .sessionEvent(event))
        #expect(line == "sessions.created s-d37b \"two\\nlines \\\"quoted\\\"\\u{7}\" 1/2 relay sync-0 attached 1/1")
        #expect(!line.contains("\n"))
        let long = EventRecord(topic: "t", message: String(repeating: "m", count: 2048))
        #expect(EventSummary.line(topic: "t", .eventRecord(long)).count == 202)
    }

    @Test func agesAreReadable() {
        let now: UInt64 = 1_700_000_000_000
        #expect(AgeText.ago(now - 1_234, now: now) == "1.2 s ago")
        #expect(AgeText.ago(now - 45_000, now: now) == "45 s ago")
        #expect(AgeText.ago(now - 600_000, now: now) == "10 min ago")
        #expect(AgeText.ago(now - 3 * 3_600_000, now: now) == "3 h ago")
        #expect(AgeText.ago(now - 5 * 86_400_000, now: now) == "5 d ago")
        #expect(AgeText.ago(now + 500, now: now) == "just now")
        #expect(AgeText.ago(0, now: now) == "never")
    }
}
