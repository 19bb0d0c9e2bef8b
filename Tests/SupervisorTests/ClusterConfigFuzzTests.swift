import Foundation
import NetplayTestSupport
import Rollback
import Testing
@testable import Supervisor

/// An operator's cluster file, mistyped in every way at random: the shipped file with values
/// swapped for numbers past every range, negative ones, empty ones, YAML punctuation, aliases
/// and control characters, lines dropped or repeated. Each one parses or is refused with one
/// line naming the file; none traps (a value the checks let through into arithmetic or an
/// index would).
@Suite("cluster.yaml under random edits", .ownThread)
struct ClusterConfigFuzzTests {
    static let shipped = try! String(contentsOfFile: ClusterConfigTests.composeCluster, encoding: .utf8)
    static let replacements = ["-1", "0", "99999999999999999999", "9223372036854775807", "-9223372036854775808", "1e400", "nan",
                               "", "~", "[", "]", "{", "}", "*a", "&a x", "\"", "'", ":", "- x", "true", "0x10", "1.5s", "-3s",
                               "tcp://127.0.0.1:99999", "tcp://[::1]:7000", "{replica}", "{nope.endpoint}", "\u{1B}[31m", "\t"]

    @Test(arguments: 0 ..< 8)
    func randomEditsParseOrGiveOneLine(seed: Int) {
        var rng = SeededRandom(seed: UInt64(seed) &+ 1_000)
        var refused = 0, parsed = 0
        for _ in 0 ..< 250 {
            var lines = Self.shipped.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for _ in 0 ..< Int(rng.next() % 3) + 1 {
                let index = Int(rng.next() % UInt64(lines.count))
                switch rng.next() % 4 {
                case 0:
                    // A value replaced: after the first ':' of the line, or the whole line.
                    let replacement = Self.replacements[Int(rng.next() % UInt64(Self.replacements.count))]
                    if let colon = lines[index].firstIndex(of: ":") {
                        lines[index] = String(lines[index][...colon]) + " " + replacement
                    } else {
                        lines[index] = replacement
                    }
                case 1: lines.remove(at: index)
                case 2: lines.insert(lines[index], at: index)
                default:
                    // A digit run made huge or negative.
                    lines[index] = lines[index].replacingOccurrences(of: "0", with: rng.next() % 2 == 0 ? "000000000000000" : "-0")
                }
                if lines.isEmpty { lines = [""] }
            }
            do {
                _ = try ClusterConfigLoader.parse(lines.joined(separator: "\n"), fileName: "cluster.yaml", environment: [:])
                parsed += 1
            } catch {
                refused += 1
                #expect(error.description.hasPrefix("cluster.yaml: ") && !error.description.contains("\n"), "\(error.description)")
            }
        }
        #expect(refused > 0 && refused + parsed == 250)
    }
}
