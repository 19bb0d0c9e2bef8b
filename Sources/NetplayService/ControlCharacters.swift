/// Control characters in text that came from elsewhere (a peer's name, a room's title, a log
/// message): what counts as one, and how a line shows it without breaking. Logs, event
/// summaries and netplayctl's lines all escape through here, so a forged line break or a
/// terminal escape never reaches an operator's screen as itself.
public enum ControlCharacters {
    /// C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
    public static func contains(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    /// `text` with `\r`, `\n`, `\t`, and `\u{xx}` (lowercase hex) for every other control
    /// character; with `quotes`, also `"` and `\` escaped, for text shown between quotes.
    public static func escaped(_ text: some StringProtocol, quotes: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { contains($0) || (quotes && ($0 == "\"" || $0 == "\\")) }) else {
            return String(text)
        }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\r": out += "\\r"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\"" where quotes: out += "\\\""
            case "\\" where quotes: out += "\\\\"
            case _ where contains(scalar): out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `text` escaped as ``escaped(_:quotes:)`` does, then cut to at most `maxBytes` bytes of
    /// UTF-8 on a character boundary: fit for a wire string of that `@max_len` that came from
    /// elsewhere (a child's output line, a peer's name), which would otherwise fail the whole
    /// message's encoding (a NUL, or a cut counted in characters).
    public static func fitted(_ text: some StringProtocol, maxBytes: Int) -> String {
        let line = escaped(text)
        guard line.utf8.count > maxBytes else { return line }
        var end = line.startIndex, used = 0
        for character in line {
            let size = character.utf8.count
            guard used + size <= maxBytes else { break }
            used += size
            end = line.index(after: end)
        }
        return String(line[..<end])
    }
}
