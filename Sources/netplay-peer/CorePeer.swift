import ArgumentParser
import Foundation
import Games
import Libretro
import NetplayWire
import Rollback
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A libretro core as netplay-peer's game: a ``LibretroGame`` plus the state coding that state
/// transfers (desync healing, late join, spectators) need. A state is the core's serialization;
/// one from the network decodes only when it has this core's state size.
struct CoreGame: SerializableGame {
    /// A serialized core state.
    struct State: Sendable, Hashable {
        let bytes: [UInt8]
    }

    /// The state size of the one core this process runs (decoding happens without the core).
    private static let expectedStateSize = Mutex<Int?>(nil)

    var game: LibretroGame

    init(game: LibretroGame) {
        self.game = game
        Self.expectedStateSize.withLock { $0 = game.core.stateSize }
    }

    func saveState() -> State { State(bytes: game.saveState().bytes) }

    mutating func loadState(_ state: State) {
        do {
            try game.core.loadState(game.core.state(from: state.bytes))
        } catch {
            fatalError("libretro host: cannot load a state: \(error)")
        }
    }

    mutating func advanceFrame(_ inputs: FrameInputs) { game.advanceFrame(inputs) }
    func checksum() -> UInt64 { game.checksum() }

    static func encode(_ state: State) -> [UInt8] { state.bytes }

    static func decode(_ bytes: [UInt8]) -> State? {
        guard let size = expectedStateSize.withLock({ $0 }), bytes.count == size else { return nil }
        return State(bytes: bytes)
    }
}

/// A loaded core and content with what the session needs to know about them.
struct LoadedCore {
    let core: LibretroCore
    /// The room's game: content name, CRC32, MD5 and size; core id (the library name, lower
    /// case) and version. The coordinator refuses joiners whose values differ.
    let content: ContentInfo
    /// Checksum of the state every peer starts from.
    let initialChecksum: UInt64
    /// The buttons passed to the core.
    let buttonMask: JoypadButtons

    /// The core id netplay-peer announces for a libretro core: `libretro.<library name>`.
    static func coreId(libraryName: String) -> String {
        "libretro." + libraryName.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
    }

    /// Loads `corePath` with `contentPath` for `players` ports, in a deterministic heap (see
    /// ``DeterministicHeap``), so that every peer's fresh core starts in the same state.
    /// Failures are one-line `ValidationError`s.
    static func load(corePath: String, contentPath: String, players: Int, buttons: String?) throws -> LoadedCore {
        let data: Data
        if FileManager.default.fileExists(atPath: contentPath) {
            guard let read = FileManager.default.contents(atPath: contentPath) else {
                throw ValidationError("cannot read content \(contentPath)")
            }
            data = read
        } else {
            throw ValidationError("content not found: no file at \(contentPath)")
        }
        let core: LibretroCore
        do {
            core = try DeterministicHeap.run {
                try LibretroCore(corePath: corePath, contentPath: contentPath,
                                 options: .init(portCount: max(2, players)))
            }
        } catch let error as LibretroError {
            throw ValidationError("\(error)")
        }
        let mask: JoypadButtons
        switch buttons ?? (core.systemInfo.libraryName.lowercased() == "nestopia" ? "nes" : "all") {
        case "nes": mask = .nes
        case "all": mask = .all
        case let hex:
            guard let value = UInt16(hex.hasPrefix("0x") ? String(hex.dropFirst(2)) : hex, radix: 16) else {
                core.close()
                throw ValidationError("--buttons must be nes, all or a 16-bit hexadecimal mask, got '\(hex)'")
            }
            mask = JoypadButtons(rawValue: value)
        }
        let bytes = [UInt8](data)
        let name = URL(fileURLWithPath: contentPath).deletingPathExtension().lastPathComponent
        let system = URL(fileURLWithPath: contentPath).pathExtension.lowercased()
        let content = ContentInfo(gameName: name, crc32: ContentDigest.crc32(bytes), md5: ContentDigest.md5(bytes),
                                  coreId: coreId(libraryName: core.systemInfo.libraryName),
                                  coreVersion: core.systemInfo.libraryVersion, system: system,
                                  contentSize: UInt64(bytes.count))
        let initial: UInt64
        do { initial = try core.stateChecksum() } catch {
            core.close()
            throw ValidationError("\(error)")
        }
        return LoadedCore(core: core, content: content, initialChecksum: initial, buttonMask: mask)
    }

    /// `libretro;players=N;buttons=XXXX;initial=XXXXXXXXXXXXXXXX`, stored in the replay header.
    func gameOptions(players: Int) -> [UInt8] {
        Array("libretro;players=\(players);buttons=\(String(buttonMask.rawValue, radix: 16));initial=\(String(initialChecksum, radix: 16))".utf8)
    }

    /// Parses ``gameOptions(players:)``: players, button mask and initial checksum.
    static func parse(options: [UInt8]) -> (players: Int, buttons: UInt16, initial: UInt64)? {
        let text = String(decoding: options, as: UTF8.self)
        guard text.hasPrefix("libretro;") else { return nil }
        var fields: [String: String] = [:]
        for part in text.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
        }
        guard let players = fields["players"].flatMap({ Int($0) }), let buttons = fields["buttons"].flatMap({ UInt16($0, radix: 16) }),
              let initial = fields["initial"].flatMap({ UInt64($0, radix: 16) }) else { return nil }
        return (players, buttons, initial)
    }

    /// The one-line description logged at start.
    var summary: String {
        "\(core.systemInfo.libraryName) \(core.systemInfo.libraryVersion), \(content.gameName) CRC32 "
            + String(format: "%08X", content.crc32) + ", \(core.stateSize)-byte states, "
            + String(format: "%.4f", core.avInfo.framesPerSecond) + " fps, initial state 0x\(String(initialChecksum, radix: 16))"
    }
}

/// Makes uninitialised heap memory deterministic while a core loads.
///
/// A core may read memory it never wrote: nestopia leaves a byte of its triangle channel's
/// state uninitialised, so a fresh instance's state holds whatever the allocator handed out —
/// which depends on what the process did before (argument parsing, sockets, threads), and
/// differs between netplay-peer processes. With glibc's `M_PERTURB` set to 0xFF, every
/// allocation (other than `calloc`, which is zeroed anyway) is filled with 0x00 while the core
/// is loaded and its content started, so every process starts the core from the same bytes: the
/// state of a pristine process. Freed blocks are filled with 0xFF meanwhile; other threads'
/// allocations in that window are filled too (harmless). Reset to 0 (off) afterwards.
/// (`mallopt` is looked up at run time: the Glibc module does not export `malloc.h`; on other
/// C libraries this does nothing.)
enum DeterministicHeap {
    private typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
    /// glibc's `M_PERTURB` parameter number.
    private static let perturb: Int32 = -6

    static func run<T>(_ body: () throws -> T) rethrows -> T {
        #if canImport(Glibc)
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") {
            let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
            _ = mallopt(perturb, 0xFF)
            defer { _ = mallopt(perturb, 0) }
            return try body()
        }
        #endif
        return try body()
    }
}

/// Content identities in the form RetroArch and the coordinator compare.
enum ContentDigest {
    private static let crcTable: [UInt32] = (0 ..< 256).map { index in
        var value = UInt32(index)
        for _ in 0 ..< 8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    /// CRC-32 (IEEE 802.3, as zlib and RetroArch compute it).
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }

    private static let shifts: [UInt32] = [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                           5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
                                           4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                           6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21]
    private static let constants: [UInt32] = (0 ..< 64).map { UInt32(truncatingIfNeeded: Int64(abs(sin(Double($0 + 1))) * 4_294_967_296)) }

    /// MD5 (RFC 1321), 16 bytes.
    static func md5(_ bytes: [UInt8]) -> [UInt8] {
        var message = bytes
        let bitLength = UInt64(bytes.count) &* 8
        message.append(0x80)
        while message.count % 64 != 56 { message.append(0) }
        for index in 0 ..< 8 { message.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(index)))) }
        var a0: UInt32 = 0x6745_2301, b0: UInt32 = 0xEFCD_AB89, c0: UInt32 = 0x98BA_DCFE, d0: UInt32 = 0x1032_5476
        var words = [UInt32](repeating: 0, count: 16)
        for chunk in stride(from: 0, to: message.count, by: 64) {
            for index in 0 ..< 16 {
                let base = chunk + index * 4
                words[index] = UInt32(message[base]) | UInt32(message[base + 1]) << 8
                    | UInt32(message[base + 2]) << 16 | UInt32(message[base + 3]) << 24
            }
            var a = a0, b = b0, c = c0, d = d0
            for round in 0 ..< 64 {
                var f: UInt32
                let g: Int
                switch round {
                case 0 ..< 16: f = (b & c) | (~b & d); g = round
                case 16 ..< 32: f = (d & b) | (~d & c); g = (5 * round + 1) % 16
                case 32 ..< 48: f = b ^ c ^ d; g = (3 * round + 5) % 16
                default: f = c ^ (b | ~d); g = (7 * round) % 16
                }
                f = f &+ a &+ constants[round] &+ words[g]
                a = d; d = c; c = b
                b = b &+ ((f << shifts[round]) | (f >> (32 - shifts[round])))
            }
            a0 = a0 &+ a; b0 = b0 &+ b; c0 = c0 &+ c; d0 = d0 &+ d
        }
        var digest: [UInt8] = []
        for word in [a0, b0, c0, d0] { for index in 0 ..< 4 { digest.append(UInt8(truncatingIfNeeded: word >> (8 * UInt32(index)))) } }
        return digest
    }
}

/// Random joypad inputs for a core: every 8 frames a new random set of held buttons per slot
/// (the game's button mask drops what the core must not see), or nothing pressed.
struct CoreInputScript {
    let kind: InputScript.Kind
    let seed: UInt64
    let slot: Int

    func input(frame: Int) -> GameInput {
        guard kind == .random else { return .zero }
        let value = SeededRandom.hash(seed, UInt64(slot), UInt64(max(frame, 0) / 8))
        return GameInput(low: value & 0xFFFF)
    }
}
