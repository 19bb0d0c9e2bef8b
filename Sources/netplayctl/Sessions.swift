import ArgumentParser
import Foundation
import NetplayService
import NetplayWire

/// Which coordinator to talk to (`--coordinator`, env NETPLAY_COORDINATOR, default coordinator).
struct CoordinatorTarget: ParsableArguments {
    @Option(help: ArgumentHelp("Coordinator's request endpoint or service name (env NETPLAY_COORDINATOR, default coordinator).", valueName: "endpoint"))
    var coordinator: String?

    var requests: String {
        get throws { try ServiceAddress.requests(SettingResolver().text(coordinator, "NETPLAY_COORDINATOR") ?? "coordinator") }
    }

    /// Sends `body` to the coordinator over `connection`; the session it answers with.
    func session(_ body: Envelope.Body, over connection: ConnectionOptions) throws -> SessionInfo {
        let reply = try connection.client(for: try requests).request(body)
        guard case .sessionResponse(let response) = reply else { throw ClientError.unexpectedReply(reply.name) }
        return response.session
    }
}

/// The content a host plays or a joiner has.
struct ContentOptions: ParsableArguments {
    @Option(help: "Game name.") var game = ""
    @Option(help: "Content CRC32 (hex).") var crc: String?
    @Option(help: "Content MD5 (32 hex digits).") var md5: String?
    @Option(help: "Core id, e.g. nestopia.") var core = ""
    @Option(help: "Core version.") var coreVersion = ""
    @Option(help: "System, e.g. nes.") var system = ""

    func content() throws -> ContentInfo {
        var content = ContentInfo(gameName: game, coreId: core, coreVersion: coreVersion, system: system)
        if let crc { content.crc32 = try Self.crc32(crc) }
        if let md5 { content.md5 = try Self.md5(md5) }
        return content
    }

    /// A `--crc` value: a CRC32 in hexadecimal, `0x` allowed.
    static func crc32(_ text: String) throws -> UInt32 {
        guard let value = UInt32(text.hasPrefix("0x") ? String(text.dropFirst(2)) : text, radix: 16) else {
            throw ValidationError("--crc must be a CRC32 in hexadecimal, got '\(text)'")
        }
        return value
    }

    /// A `--md5` value: 32 hex digits.
    static func md5(_ text: String) throws -> [UInt8] {
        guard let bytes = Hex.decode(text), bytes.count == 16 else { throw ValidationError("--md5 must be 32 hex digits") }
        return bytes
    }
}

/// A participant's credentials for requests about them.
struct ParticipantOptions: ParsableArguments {
    @Option(help: "Your participant id (from create or join).") var participant: String
    @Option(help: "Your participant token, hex (from create or join).") var token: String

    func tokenBytes() throws -> [UInt8] {
        guard let bytes = Hex.decode(token), !bytes.isEmpty, bytes.count <= 64 else {
            throw ValidationError("--token must be the hexadecimal participant token")
        }
        return bytes
    }
}

/// What a participant's request about one session takes: the session id, the coordinator and
/// their credentials (leave, kick, start, end).
struct SessionAction: ParsableArguments {
    @Argument(help: "Session id.") var session: String
    @OptionGroup var target: CoordinatorTarget
    @OptionGroup var me: ParticipantOptions

    /// Sends the request `body` makes of the session id, participant id and token; prints the
    /// session the coordinator answers with.
    func send(over connection: ConnectionOptions,
              _ body: (_ sessionId: String, _ participantId: String, _ token: [UInt8]) -> Envelope.Body) throws {
        let answer = try target.session(body(session, me.participant, try me.tokenBytes()), over: connection)
        describe(answer).forEach(emit)
    }
}

/// Lines describing a session.
func describe(_ session: SessionInfo) -> [String] {
    let settings = session.settings ?? SessionSettings()
    let content = settings.content
    let state = session.state.shortName
    var lines = ["\(session.sessionId)  \(state)  \"\(ControlCharacters.escaped(settings.roomName, quotes: true))\"  game \"\(ControlCharacters.escaped(content.gameName, quotes: true))\" crc \(String(format: "%08X", content.crc32)) core \(content.coreId) \(content.coreVersion)  relay \(session.relayId.isEmpty ? "-" : "\(session.relayId) \(session.relayEndpoint)")  version \(session.version)"]
    for slot in session.slots {
        if let holder = slot.participant {
            lines.append("  P\(slot.slot): \(holder.name) (\(holder.participantId))\(holder.isHost ? " host" : "")"
                         + (holder.connected ? " attached" : ""))
        } else {
            lines.append("  P\(slot.slot): free")
        }
    }
    for spectator in session.spectators {
        lines.append("  spectator: \(spectator.name) (\(spectator.participantId))" + (spectator.connected ? " attached" : ""))
    }
    return lines
}

/// Lines describing a ticket.
func describe(_ ticket: JoinTicket?) -> String {
    guard let ticket else { return "ticket: none (LAN session)" }
    return "ticket: relay \(ticket.relayId) \(ticket.relayEndpoint) slot \(ticket.slot) expires \(ticket.expiresAtUnixMs) key \(ticket.keyId)"
}

extension Netplayctl {
    /// `netplayctl sessions ...`.
    struct Sessions: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List, inspect and drive the coordinator's sessions.",
            subcommands: [List.self, Show.self, Create.self, Join.self, Leave.self, Kick.self, Start.self, End.self])

        /// `netplayctl sessions list`.
        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List sessions.")
            @OptionGroup var target: CoordinatorTarget
            @Option(help: "lobby, running or ended (default: lobby and running).") var state: String?
            @Option(help: "Case-insensitive substring of the game name.") var game = ""
            @Flag(help: "Include unlisted sessions.") var unlisted = false
            @Option(help: "Only sessions on this relay.") var relay = ""
            @Flag(help: "Fetch every page.") var all = false
            @Flag(help: "Print one JSON object per session.") var json = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                var request = ListSessionsRequest(gameName: game, includeUnlisted: unlisted, pageSize: 200, relayId: relay)
                switch state?.lowercased() {
                case nil: break
                case "lobby": request.state = .lobby
                case "running": request.state = .running
                case "ended": request.state = .ended
                default: throw ValidationError("--state must be lobby, running or ended")
                }
                let client = try connection.client(for: try target.requests)
                var shown = 0
                var total: UInt32 = 0
                var walk = PageWalk(listing: "the sessions listing")
                repeat {
                    let reply = try client.request(.listSessionsRequest(request))
                    guard case .listSessionsResponse(let page) = reply else { throw ClientError.unexpectedReply(reply.name) }
                    for session in page.sessions {
                        if json { emitJSON(session.jsonLine()) } else { describe(session).forEach(emit) }
                    }
                    shown += page.sessions.count
                    total = page.totalMatching
                    request.pageToken = all ? try walk.next(after: page.sessions.count, nextToken: page.nextPageToken) : ""
                } while !request.pageToken.isEmpty
                if !json { emit("\(shown) of \(total) matching sessions") }
            }
        }

        /// `netplayctl sessions show ID`.
        struct Show: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Show one session.")
            @Argument(help: "Session id.") var session: String
            @OptionGroup var target: CoordinatorTarget
            @Flag(help: "Print JSON.") var json = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                let answer = try target.session(.getSessionRequest(GetSessionRequest(sessionId: session)), over: connection)
                if json { emitJSON(answer.jsonLine()) } else { describe(answer).forEach(emit) }
            }
        }

        /// `netplayctl sessions create`.
        struct Create: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Host a session; prints its id, your participant id and token.")
            @OptionGroup var target: CoordinatorTarget
            @OptionGroup var content: ContentOptions
            @Option(help: "Your display name.") var name = "host"
            @Option(help: "Room title.") var roomName = ""
            @Option(help: "Player slots (1 to 8).") var maxPlayers: UInt32 = 2
            @Option(help: "Spectator places (0: no spectators).") var spectators: UInt32 = 0
            @Option(help: "Password to play.") var password = ""
            @Option(help: "Password to spectate.") var spectatePassword = ""
            @Option(help: "LAN session: your in-process relay's endpoint.") var lan: String?
            @Option(help: "Region tag.") var region = ""
            @Option(help: "Input delay frames.") var frameDelay: UInt32 = 0
            @Flag(help: "Do not list the room in the lobby.") var unlisted = false
            @Flag(help: "Print the reply as JSON.") var json = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                let settings = SessionSettings(roomName: roomName.isEmpty ? "\(name)'s room" : roomName, content: try content.content(),
                                               region: region, transport: lan == nil ? .relay : .lan, lanEndpoint: lan ?? "",
                                               unlisted: unlisted, maxPlayers: maxPlayers, frameDelay: frameDelay,
                                               spectatorsAllowed: spectators > 0, maxSpectators: spectators,
                                               playPassword: password, spectatePassword: spectatePassword)
                let reply = try connection.client(for: try target.requests)
                    .request(.createSessionRequest(CreateSessionRequest(settings: settings, hostName: name)))
                guard case .createSessionResponse(let created) = reply else { throw ClientError.unexpectedReply(reply.name) }
                if json { emitJSON(Envelope(body: reply).jsonLine()); return }
                emit("session: \(created.session.sessionId)")
                emit("participant: \(created.participantId)")
                emit("token: \(Hex.encode(created.participantToken))")
                emit(describe(created.ticket))
            }
        }

        /// `netplayctl sessions join ID`.
        struct Join: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Join a session as a player or spectator.")
            @Argument(help: "Session id.") var session: String
            @OptionGroup var target: CoordinatorTarget
            @OptionGroup var content: ContentOptions
            @Option(help: "Your display name.") var name: String
            @Flag(help: "Join as a spectator.") var spectate = false
            @Option(help: "The play or spectate password.") var password = ""
            @Option(help: "Wanted slot (0: first free).") var slot: UInt32 = 0
            @Flag(help: "Print the reply as JSON.") var json = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                let reply = try connection.client(for: try target.requests).request(.joinSessionRequest(JoinSessionRequest(
                    sessionId: session, role: spectate ? .spectator : .player, name: name, password: password,
                    content: try content.content(), preferredSlot: slot)))
                guard case .joinSessionResponse(let joined) = reply else { throw ClientError.unexpectedReply(reply.name) }
                if json { emitJSON(Envelope(body: reply).jsonLine()); return }
                emit("participant: \(joined.participantId) \(spectate ? "spectator" : "slot \(joined.slot)")")
                emit("token: \(Hex.encode(joined.participantToken))")
                emit(describe(joined.ticket))
            }
        }

        /// `netplayctl sessions leave ID`.
        struct Leave: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Leave a session (the host leaving ends it).")
            @OptionGroup var action: SessionAction
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                try action.send(over: connection) { .leaveSessionRequest(LeaveSessionRequest(
                    sessionId: $0, participantId: $1, participantToken: $2)) }
            }
        }

        /// `netplayctl sessions kick ID`.
        struct Kick: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Host only: remove a participant.")
            @OptionGroup var action: SessionAction
            @Option(help: "Participant id to remove.") var kick: String
            @Option(help: "Reason shown to them.") var reason = ""
            @Flag(help: "Refuse their name if they come back.") var ban = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                try action.send(over: connection) { .kickParticipantRequest(KickParticipantRequest(
                    sessionId: $0, participantId: $1, participantToken: $2, targetParticipantId: kick, reason: reason, ban: ban)) }
            }
        }

        /// `netplayctl sessions start ID`.
        struct Start: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Host only: start the match.")
            @OptionGroup var action: SessionAction
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                try action.send(over: connection) { .startSessionRequest(StartSessionRequest(
                    sessionId: $0, participantId: $1, participantToken: $2)) }
            }
        }

        /// `netplayctl sessions end ID`.
        struct End: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Host only: end the session for everyone.")
            @OptionGroup var action: SessionAction
            @Option(help: "Reason shown to everyone.") var reason = ""
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                try action.send(over: connection) { .endSessionRequest(EndSessionRequest(
                    sessionId: $0, participantId: $1, participantToken: $2, reason: reason)) }
            }
        }
    }

    /// `netplayctl relays ...`.
    struct Relays: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Inspect the coordinator's relay registry.",
                                                        subcommands: [List.self, RetroArch.self])

        /// `netplayctl relays list`.
        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List registered relays with their load.")
            @OptionGroup var target: CoordinatorTarget
            @Flag(help: "Include relays past their TTL not yet dropped.") var includeStale = false
            @Flag(help: "Print one JSON object per relay.") var json = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                let reply = try connection.client(for: try target.requests)
                    .request(.listRelaysRequest(ListRelaysRequest(includeStale: includeStale)))
                guard case .listRelaysResponse(let list) = reply else { throw ClientError.unexpectedReply(reply.name) }
                for relay in list.relays {
                    if json { emitJSON(relay.jsonLine()); continue }
                    let load = relay.load ?? RelayLoad()
                    emit("\(relay.relayId)  \(relay.endpoint)  sessions \(load.sessions)\(load.capacitySessions > 0 ? "/\(load.capacitySessions)" : "")  peers \(load.peers)  inputs/s \(load.inputsPerSecond)  cpu \(load.cpuPercent)%  region \(relay.region.isEmpty ? "-" : relay.region)\(relay.draining ? "  draining" : "")  last seen \(AgeText.ago(relay.lastSeenUnixMs))")
                }
                if !json { emit("\(list.relays.count) relays") }
            }
        }

        /// `netplayctl relays retroarch`.
        struct RetroArch: ParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "retroarch",
                abstract: "List the RetroArch sessions relays pipe, with their join strings and health.",
                discussion: "A RetroArch client joins with retroarch --connect \"JOIN\" (docs/retroarch.md).")
            @OptionGroup var target: CoordinatorTarget
            @Option(help: "Only this relay's sessions.") var relay: String?
            @Flag(help: "Print one JSON object per session.") var json = false
            @OptionGroup var connection: ConnectionOptions

            func run() throws {
                let reply = try connection.client(for: try target.requests)
                    .request(.listRetroarchSessionsRequest(ListRetroArchSessionsRequest(relayId: relay ?? "")))
                guard case .listRetroarchSessionsResponse(let list) = reply else { throw ClientError.unexpectedReply(reply.name) }
                for session in list.sessions {
                    if json { emitJSON(session.jsonLine()); continue }
                    let core = session.coreName.isEmpty ? "-" : "\(session.coreName) \(session.coreVersion)"
                    emit("\(session.relayId)  join \(session.join)\(session.directEndpoint.isEmpty ? "" : "  direct \(session.directEndpoint)")  host \(session.hostNick.isEmpty ? "-" : session.hostNick)  core \(core)  crc \(String(format: "%08x", session.contentCrc))  clients \(session.clients)\(session.pendingClients > 0 ? "+\(session.pendingClients) waiting" : "")  frame \(session.lastFrame)  inputs \(session.inputs)  crc checks \(session.crcChecks)  resync requests \(session.resyncRequests)  host rtt \(session.hostRttMs) ms  link rtt \(session.linkRttMs) ms")
                }
                if !json { emit("\(list.sessions.count) RetroArch sessions" + (list.truncated ? " (more: ask with --relay)" : "")) }
            }
        }
    }
}
