import Foundation
import Libretro
import NetplayTestSupport
import Rollback
import Testing

/// What a frontend takes from the Libretro library to put a core on the network: content
/// identity (CRC32 as RetroArch computes it, MD5), a core loaded in a deterministic heap with its
/// starting checksum, and the core as a `SerializableGame` for state transfers. In the one
/// serialized libretro suite (cores share process-wide callback slots).
extension LibretroHostTests {
    @Suite("Libretro for netplay: content identity, loading, state coding")
    struct NetplayCoreTests {
        @Test func contentDigestsMatchTheReferenceVectors() {
            #expect(ContentDigest.crc32(Array("123456789".utf8)) == 0xCBF4_3926)
            #expect(ContentDigest.crc32([]) == 0)
            let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
            #expect(hex(ContentDigest.md5([])) == "d41d8cd98f00b204e9800998ecf8427e")
            #expect(hex(ContentDigest.md5(Array("The quick brown fox jumps over the lazy dog".utf8))) == "9e107d9d372bb6826bd81d3542a419d6")
            // Lengths around the padding's block boundaries, read in place (the digest no longer
            // copies the message; the vectors are Python's hashlib and zlib over bytes i * 7 + 3).
            for (count, md5, crc) in [(55, "52c0e574e1198de5fe3f8f11440dcb1b", 0x30C94412),
                                      (56, "46c9907fc908ee68b1e7b8e71286a518", 0xCB5E10B8),
                                      (63, "a62f6d59e837867693f042f5b8f5a236", 0xB7350C2A),
                                      (64, "7160b8fb5e9e4023d549c3971fbaeead", 0xCBD9ECF0),
                                      (65, "70bd662e7aefbda85a0f7244167b7897", 0x6D195777),
                                      (119, "e84905d4214f4d1ca56c2cdcc152b143", 0xFD968703),
                                      (120, "e3eb5a6c8669ea01a8c185b8abc8a5dc", 0x3A47AD39),
                                      (128, "10b2da1a82f16d99a81a7203fe9f02cb", 0xBD5D2E01),
                                      (1000, "10046f077f2082ac19676b8079f1cb1a", 0x17BC2A46)] as [(Int, String, UInt32)] {
                let bytes = (0 ..< count).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
                #expect(hex(ContentDigest.md5(bytes)) == md5 && ContentDigest.crc32(bytes) == crc, "\(count) bytes")
            }
            let identity = ContentIdentity(contentOf: Array("123456789".utf8), path: "/roms/Test Game.NES", coreId: "libretro.x", coreVersion: "1")
            #expect(identity.gameName == "Test Game" && identity.system == "nes" && identity.size == 9 && identity.crc32 == 0xCBF4_3926)
        }

        @Test func aCoreLoadsWithItsIdentityAndEveryLoadStartsFromTheSameState() throws {
            let core = try LibretroFixtures.nestopiaCore(), rom = try LibretroFixtures.testROM()
            let first = try LoadedCore.load(corePath: core, contentPath: rom, players: 2, buttons: nil)
            let identity = first.content, initial = first.initialChecksum, mask = first.buttonMask
            first.core.close()
            let bytes = [UInt8](FileManager.default.contents(atPath: rom)!)
            #expect(identity.crc32 == ContentDigest.crc32(bytes) && identity.md5 == ContentDigest.md5(bytes) && identity.size == UInt64(bytes.count))
            #expect(identity.coreId == "libretro.nestopia" && mask == .nes, "nestopia gets the NES buttons by default")
            let second = try LoadedCore.load(corePath: core, contentPath: rom, players: 2, buttons: "all")
            defer { second.core.close() }
            #expect(second.initialChecksum == initial && second.buttonMask == .all)
            #expect(LoadedCore.parse(options: second.gameOptions(players: 2))?.initial == initial)

            // As a serializable game: a state round-trips; one of another size is refused.
            var game = SerializableCoreGame(game: try LibretroGame(core: second.core, playerCount: 2, buttonMask: second.buttonMask))
            let start = game.saveState()
            game.advanceFrame(FrameInputs(frame: 0, inputs: [GameInput(low: 1), .zero], statuses: [.confirmed, .confirmed]))
            #expect(SerializableCoreGame.decode(SerializableCoreGame.encode(start)) == start)
            #expect(SerializableCoreGame.decode([1, 2, 3]) == nil)
            game.loadState(start)
            #expect(game.checksum() == initial)

            // A state of the right size that the core refuses (a peer's or a relay's garbage) is
            // an error, not a trap, and the core keeps the state it had.
            game.advanceFrame(FrameInputs(frame: 0, inputs: [GameInput(low: 1), .zero], statuses: [.confirmed, .confirmed]))
            let playing = game.checksum()
            let garbage = try #require(SerializableCoreGame.decode([UInt8](repeating: 0, count: start.bytes.count)))
            #expect(throws: LibretroError.self) { try game.loadForeignState(garbage) }
            #expect(game.checksum() == playing)
            try game.loadForeignState(start)
            #expect(game.checksum() == initial)
        }

        /// A core whose states vary in size (it says so with its quirks) takes transferred states
        /// of another size than its first; a core of one size still refuses them at decoding.
        @Test func aCoreOfVariableStateSizeDecodesStatesOfAnySize() throws {
            let variable = try LibretroCore(corePath: try FakeCore.path(.init(quirks: 1 << 2)), contentPath: try FakeCore.content())
            defer { variable.close() }
            _ = SerializableCoreGame(game: try LibretroGame(core: variable, playerCount: 2))
            #expect(SerializableCoreGame.decode([UInt8](repeating: 1, count: 100)) != nil)
            #expect(SerializableCoreGame.decode([]) == nil)
            let fixed = try LibretroCore(corePath: try FakeCore.path(), contentPath: try FakeCore.content())
            defer { fixed.close() }
            _ = SerializableCoreGame(game: try LibretroGame(core: fixed, playerCount: 2))
            #expect(SerializableCoreGame.decode([UInt8](repeating: 1, count: 100)) == nil)
            #expect(SerializableCoreGame.decode([UInt8](repeating: 1, count: fixed.stateSize)) != nil)
        }

        /// Quirks, as libretro.h has them: the frontend's variable-size bit set by a core does not
        /// make its states of any size; cores whose states are incomplete or single-session are
        /// refused for netplay with the reason; the answer leaves set what this host handles.
        @Test func serializationQuirksAreAnsweredAndHeeded() throws {
            for (flags, name) in [(UInt64(1) << 0, "INCOMPLETE"), (UInt64(1) << 4, "SINGLE_SESSION")] {
                #expect {
                    _ = try LibretroCore(corePath: try FakeCore.path(.init(quirks: flags)), contentPath: try FakeCore.content())
                } throws: { error in
                    guard case .serializationUnsupported(_, let reason) = error as? LibretroError else { return false }
                    return reason.contains(name)
                }
            }
            let claimsOurs = try LibretroCore(corePath: try FakeCore.path(.init(quirks: 1 << 3)), contentPath: try FakeCore.content())
            defer { claimsOurs.close() }
            #expect(claimsOurs.serializationQuirks.isEmpty)
            _ = SerializableCoreGame(game: try LibretroGame(core: claimsOurs, playerCount: 2))
            #expect(SerializableCoreGame.decode([UInt8](repeating: 1, count: 100)) == nil, "its states are of one size")
            #expect(LibretroSerializationQuirks.answer(to: [.coreVariableSize, .endianDependent, .mustInitialize])
                    == [.coreVariableSize, .frontendVariableSize, .mustInitialize])
        }

        @Test func badContentAndButtonsAreClearErrors() throws {
            let core = try LibretroFixtures.nestopiaCore()
            #expect(throws: LibretroError.contentNotFound(path: "/nonexistent/x.nes")) {
                try LoadedCore.load(corePath: core, contentPath: "/nonexistent/x.nes", players: 2, buttons: nil)
            }
            #expect(throws: LibretroError.invalidOptions("buttons must be nes, all or a 16-bit hexadecimal mask, got 'zz'")) {
                try LoadedCore.load(corePath: core, contentPath: try LibretroFixtures.testROM(), players: 2, buttons: "zz")
            }
        }
    }
}
