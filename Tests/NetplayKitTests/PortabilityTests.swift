import Foundation
import Testing
import NetplayTestSupport

/// The libraries a frontend links (NetplayKit and everything it pulls in, and Libretro) use no
/// Linux-only spelling outside `#if os(Linux)` (or `#if canImport(Glibc)`), so that a Darwin
/// build has only missing system packages to solve. A source scan: this machine cannot build for
/// Darwin, but it can keep Linux-only code fenced.
@Suite("Portable code in the frontend's libraries", .ownThread)
struct PortabilityTests {
    /// Every target a frontend's NetplayKit, NetplayC or Libretro build compiles.
    static let frontendTargets = ["Rollback", "NetplayWire", "ZeroMQ", "NetplayKit", "Libretro", "NetplayLAN", "IPv4Sockets",
                                  "NetplayService", "NetplayAuth", "InputSync", "RetroArchRelay", "NetplayC"]

    /// Spellings that exist only in glibc or the Linux kernel's API (or differ on Darwin).
    static let linuxOnly: [(pattern: String, why: String)] = [
        ("import Glibc", "Glibc is Linux's libc module (Darwin's is Darwin)"),
        ("Glibc.", "a call qualified with the Glibc module"),
        ("SOCK_STREAM.rawValue", "glibc's socket types are an enum; Darwin's are Int32"),
        ("SOCK_DGRAM.rawValue", "glibc's socket types are an enum; Darwin's are Int32"),
        ("SOCK_NONBLOCK", "socket flags that exist on Linux only"),
        ("SOCK_CLOEXEC", "socket flags that exist on Linux only"),
        ("__rusage_who_t", "glibc's type for getrusage's first argument"),
        ("ifa_ifu", "glibc's union in ifaddrs (Darwin: ifa_dstaddr)"),
        ("epoll_", "Linux's epoll"),
        ("cepoll_", "Linux's epoll (CEpoll)"),
        ("/proc/", "Linux's procfs"),
    ]

    static var sourcesDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
    }

    /// The lines of `text` outside `#if os(Linux)` / `#if canImport(Glibc)` blocks (their `#else`
    /// branches count as outside), with their numbers.
    static func unfencedLines(_ text: String) -> [(number: Int, line: String)] {
        var stack: [Bool] = []   // per open #if: whether the current branch is Linux-only
        var result: [(Int, String)] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("#if ") {
                stack.append(line.contains("os(Linux)") || line.contains("canImport(Glibc)"))
            } else if line.hasPrefix("#elseif") || line == "#else" {
                if !stack.isEmpty { stack[stack.count - 1] = line.contains("os(Linux)") || line.contains("canImport(Glibc)") }
            } else if line.hasPrefix("#endif") {
                _ = stack.popLast()
            } else if !stack.contains(true), !line.hasPrefix("//") {
                result.append((index + 1, String(raw)))
            }
        }
        return result
    }

    @Test func noLinuxOnlySpellingOutsideALinuxFence() throws {
        var findings: [String] = []
        var filesRead = 0
        for target in Self.frontendTargets {
            let directory = Self.sourcesDirectory.appendingPathComponent(target)
            guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { continue }
            for case let file as URL in walker where file.pathExtension == "swift" {
                filesRead += 1
                let text = try String(contentsOf: file, encoding: .utf8)
                for (number, line) in Self.unfencedLines(text) {
                    for (pattern, why) in Self.linuxOnly where line.contains(pattern) {
                        findings.append("\(target)/\(file.lastPathComponent):\(number): \(pattern) (\(why))")
                    }
                }
            }
        }
        #expect(filesRead > 100, "the scan must read the sources")
        #expect(findings.isEmpty, "\(findings.joined(separator: "\n"))")
    }

    @Test func theFenceTrackerSeesBranches() {
        let text = """
        #if canImport(Glibc)
        import Glibc
        #elseif canImport(Darwin)
        import Darwin
        #endif
        #if os(Linux)
        let a = SOCK_DGRAM.rawValue
        #else
        let b = SOCK_DGRAM
        #endif
        let c = 1
        """
        #expect(Self.unfencedLines(text).map(\.line) == ["import Darwin", "let b = SOCK_DGRAM", "let c = 1"])
    }
}
