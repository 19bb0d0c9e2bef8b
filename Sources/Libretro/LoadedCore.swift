import Foundation
import Rollback

/// A core loaded with its content for netplay, with what a session needs to know about them:
/// the content's identity (what a room announces and joiners must match), the checksum of the
/// state every peer starts from, and the buttons passed to the core.
public struct LoadedCore {
    /// The core, content loaded.
    public let core: LibretroCore
    /// The room's game: content name, CRC32, MD5 and size; core id (the library name, lower
    /// case) and version. The coordinator refuses joiners whose values differ.
    public let content: ContentIdentity
    /// Checksum of the state every peer starts from.
    public let initialChecksum: UInt64
    /// The buttons passed to the core.
    public let buttonMask: JoypadButtons
    /// What each player's input carries (buttons, or buttons and sticks), and so its size.
    public let inputLayout: LibretroInputLayout

    /// The core id announced for a libretro core: `libretro.<library name>`.
    public static func coreId(libraryName: String) -> String {
        "libretro." + libraryName.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
    }

    /// Loads `corePath` with `contentPath` for `players` ports, in a deterministic heap (see
    /// ``DeterministicHeap``), so that every peer's fresh core starts in the same state.
    /// `buttons`: `nes`, `all` or a 16-bit hexadecimal mask (nil: `nes` for nestopia, else `all`);
    /// `inputLayout`: the device on every port.
    public static func load(corePath: String, contentPath: String, players: Int, buttons: String?,
                            inputLayout: LibretroInputLayout = .joypad) throws(LibretroError) -> LoadedCore {
        guard FileManager.default.fileExists(atPath: contentPath) else { throw .contentNotFound(path: contentPath) }
        guard let data = FileManager.default.contents(atPath: contentPath) else {
            throw .contentUnreadable(path: contentPath, reason: "cannot read the file")
        }
        var options = LibretroCore.Options(portCount: max(2, players))
        options.inputLayout = inputLayout
        let core: LibretroCore
        do {
            core = try DeterministicHeap.run {
                try LibretroCore(corePath: corePath, contentPath: contentPath,
                                 options: options)
            }
        } catch let error as LibretroError {
            throw error
        } catch {
            throw .cannotLoadCore(path: corePath, reason: "\(error)")
        }
        let mask: JoypadButtons
        switch buttons ?? (core.systemInfo.libraryName.lowercased() == "nestopia" ? "nes" : "all") {
        case "nes": mask = .nes
        case "all": mask = .all
        case let hex:
            guard let value = UInt16(hex.hasPrefix("0x") ? String(hex.dropFirst(2)) : hex, radix: 16) else {
                core.close()
                throw .invalidOptions("buttons must be nes, all or a 16-bit hexadecimal mask, got '\(hex)'")
            }
            mask = JoypadButtons(rawValue: value)
        }
        let content = ContentIdentity(contentOf: [UInt8](data), path: contentPath, coreId: coreId(libraryName: core.systemInfo.libraryName),
                                      coreVersion: core.systemInfo.libraryVersion)
        let initial: UInt64
        do { initial = try core.stateChecksum() } catch {
            core.close()
            throw error as? LibretroError ?? .serializationUnsupported(core: core.systemInfo.libraryName, reason: "\(error)")
        }
        return LoadedCore(core: core, content: content, initialChecksum: initial, buttonMask: mask,
                          inputLayout: inputLayout)
    }

    /// `libretro;players=N;buttons=XXXX;initial=XXXXXXXXXXXXXXXX`, stored in the replay header.
    public func gameOptions(players: Int) -> [UInt8] {
        GameOptions(tag: "libretro", ["players": String(players), "buttons": String(buttonMask.rawValue, radix: 16),
                                      "initial": String(initialChecksum, radix: 16)]).bytes
    }

    /// Parses ``gameOptions(players:)``: players, button mask and initial checksum.
    public static func parse(options: [UInt8]) -> (players: Int, buttons: UInt16, initial: UInt64)? {
        let fields = GameOptions(decoding: options)
        guard fields.tag == "libretro", let players = fields["players"].flatMap({ Int($0) }),
              let buttons = fields["buttons"].flatMap({ UInt16($0, radix: 16) }),
              let initial = fields["initial"].flatMap({ UInt64($0, radix: 16) }) else { return nil }
        return (players, buttons, initial)
    }

    /// The one-line description logged at start.
    public var summary: String {
        "\(core.systemInfo.libraryName) \(core.systemInfo.libraryVersion), \(content.gameName) CRC32 "
            + String(format: "%08X", content.crc32) + ", \(core.stateSize)-byte states, "
            + String(format: "%.4f", core.avInfo.framesPerSecond) + " fps, initial state 0x\(String(initialChecksum, radix: 16))"
    }
}
